"""Save a half-precision copy of the packaged all-MiniLM-L6-v2 (about 45 MB instead of 90) to carry to a GPU box.

    python benchmarks/pack_model_fp16.py OUT_DIR [--model DIR]

Same weights rounded to float16; loading it with sentence-transformers gives float32 modules again unless the
caller calls `.half()` (benchmarks/gpu_embed.py measures both).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first


def pack(out: Path, model: Path | None = None) -> int:
    """Write the fp16 copy into `out`; returns its size in bytes."""
    from sentence_transformers import SentenceTransformer

    if model is None:
        from failatlas.embed.models import packaged_model_dir

        model = packaged_model_dir()
    st = SentenceTransformer(str(model), device="cpu")
    st.half()
    st.save(str(out), safe_serialization=True)
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", type=Path, help="sentence-transformers folder (default: the packaged model)")
    args = ap.parse_args(argv)
    size = pack(args.out, args.model)
    print(f"{args.out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
