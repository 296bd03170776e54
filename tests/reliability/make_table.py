"""Write docs/reliability.md from the rows the reliability suite recorded (test-artifacts/reliability.json).

    python -m pytest -q tests/reliability && python tests/reliability/make_table.py

`--keep`: a row the artifact lacks (its test was not run this time) keeps what the current doc says for it,
instead of "not run"; for re-running only the tests a change touched.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.reliability.rows import ROWS  # noqa: E402

ARTIFACT = ROOT / "test-artifacts" / "reliability.json"
DOC = ROOT / "docs" / "reliability.md"
HEADER = """# Reliability and security

The harness runs untrusted code written by agents, talks to flaky remote endpoints and reads files from other
tools. The suite in `tests/reliability/` proves it holds: hostile agents (`bench_core/agents/hostile*.py`,
registered as `hostile-*`) run in real Docker sandboxes on `mini-ridge-cv`, and those that attack the verdicts
on every CPU task of the mini-suite (`test_attack_scores.py`: none may score above `null`); faults are injected into the
runner, the LLM endpoint, the Docker daemon and the judges; importers and exporters are fuzzed with hypothesis.

Re-run it and regenerate this table:

```bash
python -m pytest -q tests/reliability
python tests/reliability/make_table.py
```

"Rows" counts the rows of the tables the check is about (runs, judgements, insights, ...) before and after.
This file is generated; `tests/reliability/test_doc.py` fails when it no longer lists the rows the suite defines.

Limits the table does not hide:

- Disk: `/tmp` is a tmpfs bounded by its size and the memory limit, but the working copy has no quota unless the
  Docker storage driver supports one (`SandboxSpec.disk_mb`, overlay2 on xfs with pquota; not fuse-overlayfs).
  A command can write into it until its deadline; the harness then copies out at most 32 MiB per file and 512 MiB
  in all (100,000 entries, 64 levels, 300 s; what is left out is recorded), stores at most 1 MiB per output file
  and an 8 MiB diff.
- Hidden tests judge across a process boundary (docs/sandbox.md): assertions, counting and the result live in a
  host process that never imports the agent's code; only plain data comes back from the sandbox. What the agent
  can still do is compute the right values somewhere else than the masked code: the counterfactual re-check
  (masked parts restored to their stubs), the rebinding check and the consistency rule between I and E fail such
  passes (docs/metrics.md), but an implementation written into a masked *file* cannot be told from a real one.
- Network: the host guard needs root and iptables on the Docker host (else a network-enabled sandbox does not
  start unless `FAILATLAS_SANDBOX_HOST_GUARD=off`); the local backend has no network isolation at all.
- Background processes: nothing a command starts outlives it (bwrap: its PID namespace; Docker: the sandbox
  user's processes of no running command are killed; local: a subreaper), so an agent cannot leave a server
  running between commands, nor processes that starve the harness (docs/sandbox.md).
- The monitor's rules are patterns over commands: an agent that fakes results while echoing the run command
  (`echo python3 run.py`) escapes the `fabricated_results` rule; the validator's clean re-run still catches it.

"""


def _cell(value: object) -> str:
    text = "–" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def current_rows() -> dict[tuple[str, str, str], dict]:
    """The rows the doc holds now, by their (area, behaviour, expected) cells."""
    if not DOC.exists():
        return {}
    out = {}
    for line in DOC.read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| area"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 7:
            def number(cell: str) -> int | None:
                return int(cell) if cell.isdigit() else None

            out[tuple(cells[:3])] = {"observed": cells[3].replace("\\|", "|"), "rows_before": number(cells[4]),
                                     "rows_after": number(cells[5]), "status": cells[6]}
    return out


def render(recorded: list[dict], *, keep: bool = False) -> str:
    by_id = {r["id"]: r for r in recorded}
    if keep:
        kept = current_rows()
        for row_id, row in ROWS.items():
            if row_id not in by_id and tuple(_cell(v) for v in row) in kept:
                by_id[row_id] = kept[tuple(_cell(v) for v in row)]
    lines = ["| area | behaviour or fault | expected outcome | observed outcome | rows before | rows after "
             "| status |", "|---|---|---|---|---|---|---|"]
    for row_id, (area, behaviour, expected) in ROWS.items():
        r = by_id.get(row_id, {})
        lines.append("| " + " | ".join(_cell(v) for v in (
            area, behaviour, expected, r.get("observed", "not run"), r.get("rows_before"), r.get("rows_after"),
            r.get("status", "not run"))) + " |")
    return HEADER + "\n".join(lines) + "\n"


def main() -> None:
    recorded = json.loads(ARTIFACT.read_text())["rows"] if ARTIFACT.exists() else []
    DOC.write_text(render(recorded, keep="--keep" in sys.argv[1:]))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
