"""A stand-in of the ETT hourly datasets (ETTh1/ETTh2) in their real format, for EXP-Bench 18244's PDF repository
(issue 52): the real files are not in the public copy here. Synthetic and seeded (the same arguments give
byte-identical files): `date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT`, one row an hour from 2016-07-01 00:00:00, loads
as daily and weekly cycles with noise and the oil temperature (OT) following them. 14,400 rows by default: the
repository's `Dataset_ETT_hour` cuts fixed borders (12 months train, 4 validation, 4 test, of 30-day months), so
fewer rows leave its test split empty. It is not ETT: its numbers are invented.

    python benchmarks/standin_etth.py OUT [--name ETTh2] [--rows 14400] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
from datetime import datetime, timedelta
from pathlib import Path

COLUMNS = ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL")


def write(out: Path, *, name: str = "ETTh2", rows: int = 14400, seed: int = 0) -> Path:
    """Write `out/<name>.csv`; returns its path."""
    rng = random.Random(seed)
    start = datetime(2016, 7, 1)
    phases = [rng.uniform(0, 2 * math.pi) for _ in COLUMNS]
    levels = [rng.uniform(2, 40) for _ in COLUMNS]
    lines = ["date," + ",".join(COLUMNS) + ",OT"]
    ot = 30.0
    for i in range(rows):
        day = 2 * math.pi * (i % 24) / 24
        week = 2 * math.pi * (i % 168) / 168
        values = [level * (1 + 0.3 * math.sin(day + p) + 0.1 * math.sin(week + p)) + rng.gauss(0, level * 0.05)
                  for level, p in zip(levels, phases, strict=True)]
        ot = 0.95 * ot + 0.05 * (25 + 0.2 * sum(values) / len(values)) + rng.gauss(0, 0.3)
        stamp = (start + timedelta(hours=i)).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(stamp + "," + ",".join(f"{v:.3f}" for v in values) + f",{ot:.3f}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--name", default="ETTh2")
    ap.add_argument("--rows", type=int, default=14400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    path = write(args.out, name=args.name, rows=args.rows, seed=args.seed)
    print(f"wrote {path}: {args.rows} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
