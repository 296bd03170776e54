from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIT = """
import json, sys
import numpy as np
from failatlas.cluster.components import make_reducer
from failatlas.cluster.jit import numba_cache_stats
X = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)
# manhattan: a metric only umap-learn computes, so umap-learn (not NumpyUMAP) fits these 300 points
Y = make_reducer("umap", n_neighbors=10, n_components=3, metric="manhattan", random_state=1).fit_transform(X)
np.save(sys.argv[1], Y)
print(json.dumps(numba_cache_stats()))
"""


def _fit(tmp_path: Path, name: str, **env: str) -> tuple[dict, np.ndarray]:
    out = tmp_path / f"{name}.npy"
    proc = subprocess.run(
        [sys.executable, "-c", FIT, str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "numba"), **env},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


def test_a_second_process_loads_umaps_compiled_code_from_the_cache_and_gets_the_same_result(tmp_path):
    first, y1 = _fit(tmp_path, "first")
    assert first["functions"] > 100 and first["misses"] > 0 and first["hits"] == 0
    assert list((tmp_path / "numba").rglob("*.nbi"))  # numba's index files, one per cached function
    second, y2 = _fit(tmp_path, "second")
    assert second["hits"] > 0 and second["misses"] == 0  # nothing compiled again
    assert np.array_equal(y1, y2)


def test_the_cache_can_be_switched_off(tmp_path):
    stats, _ = _fit(tmp_path, "off", FAILATLAS_NUMBA_CACHE="0")
    assert stats == {"functions": 0, "hits": 0, "misses": 0}
