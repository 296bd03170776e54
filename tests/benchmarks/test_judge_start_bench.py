"""`benchmarks/judge_start.py` runs both ways to the end and prints a ratio for each measure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_judge_start_benchmark_runs_both_ways_and_prints_ratios() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "judge_start.py"), "--judges", "1", "--rounds",
                          "1"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert "round 1, fresh" in out and "round 1, forked" in out
    ratios = re.search(r"forked / fresh = ([0-9.]+) \(wall\), ([0-9.]+) \(CPU\)", out)
    assert ratios is not None and all(float(r) > 0 for r in ratios.groups()), out
