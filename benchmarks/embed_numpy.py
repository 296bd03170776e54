"""Encoding statements on the CPU in a fresh process: the numpy encoder (`embed/numpy_bert.py`) beside torch's fast
path (sentence-transformers' model, Rust tokenizer ahead of it), all-MiniLM-L6-v2, side by side in one run.

    python benchmarks/embed_numpy.py [--sizes 41,500,3000] [--rounds 2]

Each measure is a fresh `python3` process that imports the embedder, loads the model and encodes N statements (the
shape of mined insights: 8-60 words of failure vocabulary), as `failatlas embed` does on first use; the two paths
alternate per round. Prints each process's CPU seconds (its own and its threads', from `resource`) and wall
seconds, the ratio numpy / torch, and the largest difference between the two paths' vectors. The numpy path is
measured at every size (the product uses it up to `SentenceTransformerEmbedder.NUMPY_MAX` texts a call).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, random, resource, sys, time
import numpy as np
wall = time.monotonic()
from failatlas.embed.models import SentenceTransformerEmbedder
n, numpy, out = int(sys.argv[1]), sys.argv[2] == "numpy", sys.argv[3]
words = ("model train CUDA memory NaN loss import failed baseline seed GPU epoch the agent wrote results without "
         "running re-run did not reproduce missing package hidden test expected value conclusion").split()
rng = random.Random(7)
texts = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 60))) for _ in range(n)]
embedder = SentenceTransformerEmbedder(device="cpu", numpy=numpy)
embedder.NUMPY_MAX = 10**9  # measured at every size, whatever the product's threshold
vectors = embedder.encode(texts, batch_size=64)
usage = resource.getrusage(resource.RUSAGE_SELF)
np.save(out, vectors)
print(json.dumps({"path": embedder.encode_path, "cpu": usage.ru_utime + usage.ru_stime,
                  "wall": time.monotonic() - wall, "torch": "torch" in sys.modules}))
"""


def _one(n: int, numpy: bool, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(n), "numpy" if numpy else "torch", str(out)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="41,500,3000")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{'texts':>6} {'numpy CPU s':>12} {'torch CPU s':>12} {'ratio':>6} {'numpy wall':>11} {'torch wall':>11}"
          f" {'ratio':>6} {'max |diff|':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            got: dict[bool, list[dict]] = {True: [], False: []}
            for r in range(args.rounds):
                for numpy in ((True, False) if r % 2 == 0 else (False, True)):
                    row = _one(n, numpy, Path(tmp) / f"{numpy}.npy")
                    if row["path"] != ("numpy" if numpy else "fast") or row["torch"] == numpy:
                        raise SystemExit(f"unexpected path: {row}")
                    got[numpy].append(row)
            diff = float(np.abs(np.load(Path(tmp) / "True.npy") - np.load(Path(tmp) / "False.npy")).max())

            def median(rows: list[dict], key: str) -> float:
                return sorted(r[key] for r in rows)[len(rows) // 2]

            cn, ct = median(got[True], "cpu"), median(got[False], "cpu")
            wn, wt = median(got[True], "wall"), median(got[False], "wall")
            print(f"{n:>6} {cn:>12.2f} {ct:>12.2f} {cn / ct:>5.2f}x {wn:>11.2f} {wt:>11.2f} {wn / wt:>5.2f}x"
                  f" {diff:>11.1e}")


if __name__ == "__main__":
    main()
