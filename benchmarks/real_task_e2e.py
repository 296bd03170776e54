"""A real task end to end (issue 40): AutoExperiment's 2205.00048 (JME-Fairness), task
`autoexperiment-2205.00048_0`, validated by gold and null through `failatlas tasks validate`, with its environment
built from the repository's own spec (`env/jme.yml`) and a stand-in dataset of MovieLens 1M's format given with
`--data`, expected values from the reference's own run on it (the real data is not public). Every step is a
`failatlas` command as a user types it; each is timed and what it printed last is kept.

    python benchmarks/real_task_e2e.py --mlrc ../shared/data/autoexperiment/MLRC --sandbox bwrap --out OUT
    python benchmarks/real_task_e2e.py --mlrc DIR --sandbox docker --out OUT
    python benchmarks/real_task_e2e.py --mlrc DIR --sandbox bwrap --out OUT --wheels DIR --offline --gpus 1

Steps, in a fresh store under OUT (world-traversable, since sandbox users reach the venv beside it):
1. `tasks import MLRC`;
2. the stand-in: `benchmarks/standin_ml1m.py OUT/data/ml1m`;
3. the repository: a copy of `2205.00048/code` whose fixed data paths are links into the data mount
   (`src/datasets/ml-1m/{ratings,users,movies}.dat -> /data/ml1m/...`, `src/models/ml -> /data/ml1m/runs`) with the
   folder the code writes its results to (`src/outputs/ml-1m`), registered with `repos add COPY --task T`;
4. `sandbox build-env --task T --best-effort` (an image) or, under bwrap, `--venv` (with `--wheels DIR --offline`
   on a host without network: the host's packages and the wheels only);
5. `tasks validate --task T --sandbox S --environment prebuilt --data ml1m=OUT/data/ml1m --expected-from-reference
   --mutants 0 [--gpus N]`;
6. `bench report --by paper` and `bench show` of gold's run.
Writes OUT/real_task_e2e.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TASK = "autoexperiment-2205.00048_0"
HERE = Path(__file__).resolve().parent


def _cli(out: Path, *args: str, timeout: int = 3600) -> dict:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "failatlas", "--db", str(out / "store.duckdb"), *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "100"})
    text = (proc.stdout + proc.stderr).strip()
    step = {"command": "failatlas " + " ".join(args), "exit": proc.returncode,
            "seconds": round(time.monotonic() - started, 1), "tail": text.splitlines()[-25:]}
    print(json.dumps(step, indent=1), flush=True)
    return step


def _repository(mlrc: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(mlrc / "2205.00048" / "code", dest, symlinks=True)
    for here, dirs, files in os.walk(dest):
        for name in [*dirs, *files]:
            path = os.path.join(here, name)
            os.chmod(path, os.stat(path).st_mode | 0o200)
    for name in ("ratings", "users", "movies"):
        link = dest / "src" / "datasets" / "ml-1m" / f"{name}.dat"
        link.unlink(missing_ok=True)
        link.symlink_to(f"/data/ml1m/{name}.dat")
    (dest / "src" / "models").mkdir(exist_ok=True)
    (dest / "src" / "models" / "ml").symlink_to("/data/ml1m/runs")
    (dest / "src" / "outputs" / "ml-1m").mkdir(parents=True, exist_ok=True)
    (dest / "src" / "outputs" / "ml-1m" / ".keep").write_text("")
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mlrc", type=Path, required=True, help="AutoExperiment's dataset/MLRC folder")
    ap.add_argument("--sandbox", choices=("bwrap", "docker"), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", type=Path, help="a folder of wheels the venv may install from")
    ap.add_argument("--offline", action="store_true", help="no package index (a host without network)")
    ap.add_argument("--gpus", type=int, help="GPUs for the runs (the rows declare none)")
    ap.add_argument("--users", type=int, default=100, help="the stand-in's users (benchmarks/standin_ml1m.py)")
    ap.add_argument("--items", type=int, default=170, help="the stand-in's movies: 100 x 170 keeps each call of "
                    "the masked II_F under the derived tests' 1 MiB per-call cap, so I is checked")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    steps = [_cli(out, "tasks", "import", str(args.mlrc.resolve()))]
    data = out / "data" / "ml1m"
    started = time.monotonic()
    sizes = ["--users", str(args.users), "--items", str(args.items)]
    gen = subprocess.run([sys.executable, str(HERE / "standin_ml1m.py"), str(data), *sizes], capture_output=True,
                         text=True)
    steps.append({"command": f"python benchmarks/standin_ml1m.py {data} {' '.join(sizes)}", "exit": gen.returncode,
                  "seconds": round(time.monotonic() - started, 1), "tail": gen.stdout.strip().splitlines()[-3:]})
    (out / "data").chmod(0o755)
    repo = _repository(args.mlrc.resolve(), out / "jme-code")
    steps.append(_cli(out, "repos", "add", str(repo), "--task", TASK))
    build = ["sandbox", "build-env", "--task", TASK, "--best-effort"]
    if args.sandbox == "bwrap":
        build.append("--venv")
        if args.wheels:
            build += ["--wheels", str(args.wheels.resolve())]
        if args.offline:
            build.append("--offline")
    steps.append(_cli(out, *build, timeout=7200))
    validate = ["tasks", "validate", "--task", TASK, "--sandbox", args.sandbox, "--environment", "prebuilt",
                "--data", f"ml1m={data}", "--expected-from-reference", "--mutants", "0", "--out", str(out / "validate")]
    if args.gpus is not None:
        validate += ["--gpus", str(args.gpus)]
    steps.append(_cli(out, *validate, timeout=7200))
    steps.append(_cli(out, "bench", "report", "--by", "paper"))
    verdicts = json.loads((out / "validate" / "task_validation.json").read_text()) \
        if (out / "validate" / "task_validation.json").is_file() else None
    gold = None
    for row in (verdicts or {}).get("tasks", []):
        gold = gold or row.get("gold_run_id")
    if gold:
        steps.append(_cli(out, "bench", "show", gold))
    result = {"sandbox": args.sandbox, "offline": args.offline, "gpus": args.gpus, "steps": steps,
              "verdicts": verdicts}
    (out / "real_task_e2e.json").write_text(json.dumps(result, indent=1))
    return 0 if all(s["exit"] == 0 for s in steps) else 1


if __name__ == "__main__":
    raise SystemExit(main())
