"""A whole AutoExperiment paper end to end (issue 52): every task of 2205.00048 (JME-Fairness, 36 tasks) validated
with one environment build, one data input and one reference recording, through `failatlas` commands as a user
types them; each step timed, its output's end kept, and the per-paper report copied out.

    python benchmarks/paper_e2e.py --mlrc ../shared/data/autoexperiment/MLRC --out OUT                  # bwrap, PyPI
    python benchmarks/paper_e2e.py --mlrc DIR --out OUT --offline --workers 12                           # a GPU host
    python benchmarks/paper_e2e.py --mlrc DIR --out OUT --sandbox docker

Steps, in a fresh store under OUT (world-traversable: sandbox users reach the venv beside it):
1. the per-paper resource file `OUT/failatlas-papers.yaml` (0 GPUs, a prebuilt environment, 1200 s, the stand-in
   as data `ml1m`) and `tasks import MLRC --papers` it;
2. the stand-in of MovieLens 1M (`benchmarks/standin_ml1m.py`);
3. a copy of the paper's code whose data paths link into /data/ml1m, `repos add COPY --paper 2205.00048`;
4. `sandbox build-env --task T --best-effort` (`--venv` under bwrap, with `--offline` on a host without network;
   `--python` where given);
5. `tasks validate --paper 2205.00048 --expected-from-reference --mutants N --workers W --out OUT/report`.
Writes OUT/paper_e2e.json (steps, their exits and seconds, the statuses) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPER = "2205.00048"
TASK = f"autoexperiment-{PAPER}_0"


def main() -> int:
    sys.path.insert(0, str(HERE))
    from real_task_e2e import _cli, _repository

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mlrc", type=Path, required=True, help="AutoExperiment's dataset/MLRC folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sandbox", choices=("bwrap", "docker"), default="bwrap")
    ap.add_argument("--offline", action="store_true", help="no package index (a host without network)")
    ap.add_argument("--python", help="the interpreter the venv is made with (default: the one running FailAtlas)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mutants", type=int, default=0)
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--items", type=int, default=170)
    ap.add_argument("--skip-build", action="store_true", help="the environment is built already (resume)")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o755)
    steps = []
    started = time.monotonic()
    data = out / "data" / "ml1m"
    t0 = time.monotonic()
    os.system(f"{sys.executable} {HERE / 'standin_ml1m.py'} {data} --users {args.users} --items {args.items}")
    steps.append({"command": "standin_ml1m.py", "seconds": round(time.monotonic() - t0, 1)})
    (out / "failatlas-papers.yaml").write_text(
        f'"{PAPER}":\n  gpus: 0\n  environment: prebuilt\n  timeout_s: 1200\n  data: {{ml1m: data/ml1m}}\n')
    steps.append(_cli(out, "tasks", "import", str(args.mlrc), "--papers", str(out / "failatlas-papers.yaml")))
    code = _repository(args.mlrc, out / "jme-code")
    steps.append(_cli(out, "repos", "add", str(code), "--paper", PAPER))
    for here, dirs, files in os.walk(out):
        for name in [*dirs, *files]:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444 | (0o111 if os.path.isdir(path) else 0))
    if not args.skip_build:
        build = ["sandbox", "build-env", "--task", TASK, "--best-effort"]
        if args.sandbox == "bwrap":
            build.append("--venv")
            build += ["--offline"] if args.offline else []
            build += ["--python", args.python] if args.python else []
        steps.append(_cli(out, *build, timeout=3600))
    validate = _cli(out, "tasks", "validate", "--paper", PAPER, "--sandbox", args.sandbox, "--expected-from-reference",
                    "--mutants", str(args.mutants), "--workers", str(args.workers), "--out", str(out / "report"),
                    timeout=36000)
    steps.append(validate)
    report = out / "report" / f"paper_{PAPER}.json"
    summary = json.loads(report.read_text()) if report.is_file() else {}
    result = {"steps": steps, "seconds": round(time.monotonic() - started, 1), "counts": summary.get("counts"),
              "disk": summary.get("disk"), "python": sys.version.split()[0],
              "envs_bytes": sum(f.stat().st_size for f in (out / "envs").rglob("*") if f.is_file()
                                and not f.is_symlink()) if (out / "envs").is_dir() else None}
    (out / "paper_e2e.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=1))
    if (out / "report").is_dir():
        shutil.copy(out / "paper_e2e.json", out / "report" / "paper_e2e.json")
    return 0 if validate["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
