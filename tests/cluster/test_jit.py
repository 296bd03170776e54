from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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


class _Fit:
    """One fresh Python process fitting FIT, started at once; `result()` waits for it."""

    def __init__(self, folder: Path, name: str, **env: str) -> None:
        self.out, self.stdout, self.stderr = (folder / f"{name}.{ext}" for ext in ("npy", "out", "err"))
        # files, not pipes: a full pipe would stall a process nobody reads yet
        with self.stdout.open("w") as stdout, self.stderr.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", FIT, str(self.out)], stdout=stdout, stderr=stderr, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(folder / "numba"), **env},
            )

    def result(self) -> tuple[dict, np.ndarray]:
        self.proc.wait(timeout=600)
        assert self.proc.returncode == 0, self.stderr.read_text()[-3000:]
        return json.loads(self.stdout.read_text().strip().splitlines()[-1]), np.load(self.out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory):
    """The fit that compiles from nothing, in a fresh process with an empty numba cache folder of its own."""
    folder = tmp_path_factory.mktemp("cache_on")
    started = {"cache_on": (folder, _Fit(folder, "first"))}
    yield started
    started["cache_on"][1].stop()


@pytest.mark.slow  # compiles UMAP in a cold process: out of the README's quick command
def test_a_second_process_loads_umaps_compiled_code_from_the_cache_and_gets_the_same_result(cold):
    folder, started = cold["cache_on"]
    first, y1 = started.result()
    assert first["functions"] > 100 and first["misses"] > 0 and first["hits"] == 0
    assert list((folder / "numba").rglob("*.nbi"))  # numba's index files, one per cached function
    second, y2 = _Fit(folder, "second").result()
    assert second["hits"] > 0 and second["misses"] == 0  # nothing compiled again
    assert np.array_equal(y1, y2)


OFF = """
import json, sys
import numpy as np
from failatlas.cluster.jit import enable_numba_cache, numba_cache_stats
enable_numba_cache()
import umap
from numba.core.caching import NullCache
function = umap.distances.euclidean  # one of the jitted functions UMAP does not cache itself
switched = not isinstance(function._cache, NullCache)
function(np.zeros(3), np.ones(3))  # compiled here
print(json.dumps({**numba_cache_stats(), "switched": switched}))
"""


def test_the_cache_can_be_switched_off(tmp_path):
    """With FAILATLAS_NUMBA_CACHE=0 no function of UMAP or PyNNDescent is switched to the file cache, and one that
    compiles writes nothing there (no fit: what a fit would compile goes the same way)."""
    done = subprocess.run([sys.executable, "-c", OFF], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
                               "FAILATLAS_NUMBA_CACHE": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    assert stats == {"functions": 0, "hits": 0, "misses": 0, "switched": False}
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith("distances.euclidean-")]
