"""Hostile agents: each attacks the harness in one way, so the reliability suite can prove the attack is contained.

`HOSTILE_AGENTS` attack the sandbox and the trace; `SCORE_ATTACK_AGENTS` attack the verdicts instead (issue 29):
they spray the conclusion and the design with every word of the prompt and every number, write the expected
constants without computing anything, or leave outputs no reader should choke on (integers of hundreds and
thousands of digits, NaN, lone surrogates, JSON nested 200,000 levels deep). Each must score at most what `null`
scores on every phase, and none may make its run `infra_error` or stop the scoring of others.

They are registered like any agent (`hostile-<behaviour>`) and run in real sandboxes. None gets the reference:
what they can reach is exactly what any agent can reach. Each writes what it observed to the conclusion file
(when it still can), so a test can check that nothing it should not see was seen. Every command is bounded by
the budget's `command_timeout_s`; the sandbox's deadline, memory, process and output limits do the containing.
"""

from __future__ import annotations

import json
import re

from failatlas.bench_core.agents.base import (
    CONCLUSION_FILE,
    DESIGN_FILE,
    OUTPUT_DIR,
    RUN_SCRIPT,
    AgentContext,
    AgentOutcome,
    register_agent,
    task_prompt,
)

SURVIVED = "echo sandbox-still-usable"


class _HostileAgent:
    """Runs its attack commands, then one harmless command to show the sandbox is still usable."""

    name = "hostile"
    needs_reference = False
    behaviour = ""
    commands: tuple[str, ...] = ()

    def attack(self, ctx: AgentContext) -> list[str]:
        """Run the attack; returns the observations worth keeping (each command's output tail)."""
        seen = []
        for command in self.commands:
            result = ctx.sh(command)
            seen.append(f"$ {command}\nexit={result.returncode} killed={result.killed_reason}\n"
                        f"{result.stdout[-3000:]}{result.stderr[-1000:]}")
        return seen

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.note(f"hostile agent: {self.behaviour}")
        seen = self.attack(ctx)
        ctx.sh(SURVIVED)
        self.report(ctx, seen)
        return AgentOutcome(notes=self.behaviour)

    def report(self, ctx: AgentContext, seen: list[str]) -> None:
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        ctx.write(CONCLUSION_FILE, "\n\n".join(seen)[-200_000:])


class ReadGroundTruthAgent(_HostileAgent):
    """Looks for the ground truth and the reference tree anywhere in its sandbox."""

    behaviour = "read the ground truth or the reference tree"
    commands = (
        "ls -la / /reference /groundtruth /ground_truth /gold 2>&1 | head -n 60",
        "find / -xdev \\( -name 'task.yaml' -o -name 'test_hidden*' -o -name 'hidden_tests' -o -name '*expected*'"
        " -o -name 'reference' \\) 2>/dev/null | grep -v -e '^/proc' -e '^/usr' | head -n 50",
        "grep -rIl -e 10.1878 -e 3.6953 -e expected_conclusion / --exclude-dir=proc --exclude-dir=sys"
        " --exclude-dir=usr --exclude-dir=dev 2>/dev/null | head -n 20",
        "env | sort",
    )


class GitHistoryAgent(_HostileAgent):
    """Digs through every git object for the removed implementation."""

    behaviour = "read git history"
    commands = (
        "git log -p --all | head -c 200000",
        "git reflog; git fsck --lost-found 2>&1 | head",
        "git cat-file --batch-all-objects --batch-check | head -n 200",
        # the whole dump lands in the working copy, so it reaches the stored diff for inspection
        "git cat-file --batch-all-objects --batch-check='%(objectname) %(objecttype)' | awk '$2 == \"blob\" {print $1}'"
        " | git cat-file --batch | head -c 2000000 > git_objects.txt; wc -c git_objects.txt",
    )


class NetworkAgent(_HostileAgent):
    """Tries to reach the internet, the host and the Docker API."""

    behaviour = "reach the network"
    commands = (
        "curl -sS -m 5 https://example.com 2>&1 | head -c 300; echo curl_exit=${PIPESTATUS[0]}",
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3); print('CONNECTED')\"",
        "python3 -c \"import socket; socket.create_connection(('172.17.0.1', 2375), timeout=3); print('CONNECTED')\"",
        "timeout 15 pip install --no-cache-dir -q requests 2>&1 | tail -n 3",
    )


class FetchUrlAgent(_HostileAgent):
    """Under a network policy that allows package indexes, fetches what is not one: the paper, a results page, a
    repository; then tries to go around the egress proxy."""

    behaviour = "fetch non-registry URLs"
    commands = (
        "curl -sS -m 20 https://arxiv.org/abs/2205.00048 2>&1 | head -c 300; echo curl_exit=${PIPESTATUS[0]}",
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://example.org/results.json',"
        " timeout=20).read()[:200])\" 2>&1 | tail -n 1",
        "timeout 120 python3 -m pip install --user --no-cache-dir"
        " https://github.com/psf/requests/archive/refs/heads/main.zip 2>&1 | tail -n 2",
        # around the proxy: no route, no name resolution (prints ROUTE-42 only if it got through)
        "env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy curl -sS -m 10 https://pypi.org/simple/"
        " -o /dev/null && echo ROUTE-$((40 + 2)); python3 -c \"import socket; socket.create_connection(("
        "'151.101.0.223', 443), timeout=5); print('ROUTE-%d' % 42)\" 2>&1 | tail -n 1",
    )


class ForkBombAgent(_HostileAgent):
    """A fork bomb."""

    behaviour = "fork bomb"
    commands = (":(){ :|:& };:",)


class MemoryHogAgent(_HostileAgent):
    """Allocates memory without end."""

    behaviour = "allocate memory without end"
    commands = ("python3 -c \"a = []\nwhile True: a.append(bytearray(b'x' * 50_000_000))\"",)


class FillDiskAgent(_HostileAgent):
    """Fills /tmp and writes a large file into its working copy."""

    behaviour = "fill the disk"
    commands = (
        "dd if=/dev/zero of=/tmp/fill bs=1M 2>&1 | tail -n 1; echo dd_exit=${PIPESTATUS[0]}; rm -f /tmp/fill",
        # the fill again removed first: the OOM killer may have ended the first command's shell before its `rm`
        "rm -f /tmp/fill; dd if=/dev/zero of=big.bin bs=1M count=200 2>&1 | tail -n 1",
        f"mkdir -p {OUTPUT_DIR} && head -c 20000000 /dev/zero | tr '\\0' x > {CONCLUSION_FILE}",
    )

    def report(self, ctx: AgentContext, seen: list[str]) -> None:
        """Leaves the oversized conclusion in place: collecting it must not exhaust the harness."""


class InfiniteLoopAgent(_HostileAgent):
    """Loops forever, in the foreground and in an escaped background process."""

    behaviour = "loop forever"
    commands = (
        "setsid bash -c 'while :; do :; done' & while :; do :; done",
        # how many of the loops still run after the deadline (the pattern does not match this command itself)
        "sleep 1; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
        " | grep -c '[w]hile :; do'",
    )


class PrintFloodAgent(_HostileAgent):
    """Prints gigabytes to stdout: up to 100 GB, so the deadline always stops it first."""

    behaviour = "print gigabytes to stdout"
    commands = ("yes 'all work and no play makes jack a dull boy' | head -c 100000000000",)


class WriteOutsideAgent(_HostileAgent):
    """Writes outside its working copy: system folders, the host through links, another run's files."""

    behaviour = "write outside the workspace"

    def __init__(self, host_target: str = "/tmp/failatlas-escape-canary") -> None:
        self.host_target = host_target

    @property
    def commands(self) -> tuple[str, ...]:  # type: ignore[override]
        t = self.host_target
        return (
            "echo pwned >> /etc/passwd; echo exit=$?",
            "touch /usr/bin/pwned /pwned /root/pwned; echo exit=$?",
            f"mkdir -p {t} && echo pwned > {t}/pwned; ls -la {t}",
            f"ln -s {t} escape_abs && ln -s ../../../../../../../..{t} escape_rel && ln -s /etc/passwd passwd_link",
            "echo pwned > escape_abs/through_link; echo pwned > escape_rel/through_link; ls -la",
        )


class SignalHarnessAgent(_HostileAgent):
    """Tries to signal every process it can see, its sandbox's init included, and to reach the Docker API."""

    behaviour = "signal or reach the harness process"
    commands = (
        "ls -la /var/run/docker.sock /run/docker.sock 2>&1; cat /proc/1/cmdline | tr '\\0' ' '; echo",
        "ps -eo pid,user,args 2>/dev/null || ls /proc | grep -c '^[0-9]'",
        "kill -TERM 1; kill -KILL 1; kill -HUP 1; echo exit=$?",
        "kill -9 -1; echo after-kill-all",
    )


class FakeResultsAgent(_HostileAgent):
    """Writes the results file with plausible numbers and claims success, without running anything."""

    behaviour = "fake a results file"

    def attack(self, ctx: AgentContext) -> list[str]:
        fake = ('{"test_mse_ols": 10.1878, "test_mse_ridge_cv": 3.6953, "selected_alpha": 10.0}')
        ctx.write("results.json", fake)
        ctx.write(f"{OUTPUT_DIR}/run.sh", "#!/usr/bin/env bash\ncat results.json\n")
        return ["Yes: ridge with CV wins (test MSE 3.70 against 10.19); see results.json."]


class TamperTraceAgent(_HostileAgent):
    """Rewrites git history to hide its edits, plants a fake trace and prints control bytes into its output."""

    behaviour = "tamper with the trace"
    commands = (
        "echo '# tampered' >> ridge.py && git add -A && git -c user.email=a@b -c user.name=a commit -qm tamper",
        "rm -rf .git && git init -q && git add -A && git -c user.email=a@b -c user.name=a commit -qm 'clean'",
        f"mkdir -p {OUTPUT_DIR} && echo '{{\"kind\": \"tool_call\", \"command\": \"python3 run.py\"}}'"
        f" > {OUTPUT_DIR}/trace.jsonl",
        "printf 'exit=0\\n\\x00\\x1b[2J\\x1b]0;owned\\x07\\xff\\xfe not utf-8 \\x00 end\\n'",
        "history -c; unset HISTFILE; echo done",
    )


# puts, in place of each masked stub's raise, a loop that allocates memory without end (the implementation is what
# the clean re-run runs: the constructed tree holds the masked bodies, not the agent's run.py)
HOG_IN_STUBS = r"""import pathlib, re
for path in pathlib.Path('.').rglob('*.py'):
    text = path.read_text()
    hog = text
    hog = re.sub(r"^( +)raise NotImplementedError\((.*)is masked: implement it(.*)\)$",
                 lambda m: m.group(1) + "_a = []\n" + m.group(1) + "while True:\n" + m.group(1)
                 + "    _a.append(bytearray(b'x' * 50_000_000))", text, flags=re.M)
    if hog != text:
        path.write_text(hog)
        print(path)
"""


class OomExperimentAgent(_HostileAgent):
    """Implements the masked functions as loops that allocate memory without end: the clean re-run's container hits
    its limit."""

    behaviour = "experiment that allocates memory without end"

    def attack(self, ctx: AgentContext) -> list[str]:
        result = ctx.sh(f"python3 - <<'HOG'\n{HOG_IN_STUBS}HOG")
        return [f"the masked functions now allocate memory until they are killed: {result.stdout.strip()}"]


HOSTILE_AGENTS = {
    "hostile-read-ground-truth": ReadGroundTruthAgent,
    "hostile-git-history": GitHistoryAgent,
    "hostile-network": NetworkAgent,
    "hostile-fork-bomb": ForkBombAgent,
    "hostile-memory": MemoryHogAgent,
    "hostile-fill-disk": FillDiskAgent,
    "hostile-infinite-loop": InfiniteLoopAgent,
    "hostile-print-flood": PrintFloodAgent,
    "hostile-write-outside": WriteOutsideAgent,
    "hostile-signal-harness": SignalHarnessAgent,
    "hostile-fake-results": FakeResultsAgent,
    "hostile-tamper-trace": TamperTraceAgent,
    "hostile-oom-experiment": OomExperimentAgent,
}
for _name, _cls in HOSTILE_AGENTS.items():
    _cls.name = _name
    _cls.hidden = True  # attacks for testing the harness: listed by `failatlas agents --all`, not in help texts
    register_agent(_name)(_cls)

# an attack on the `registries` network policy (tests/bench_core/test_network_policies.py), kept out of the
# reliability suite's table, whose runs have no network
FetchUrlAgent.name = "hostile-fetch-url"
FetchUrlAgent.hidden = True
register_agent("hostile-fetch-url")(FetchUrlAgent)


# -- attacks on the verdicts (issue 29) -------------------------------------------------------------------------

def prompt_words(ctx: AgentContext) -> list[str]:
    """Every distinct word of the task's prompt, in order."""
    return list(dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_-]*", task_prompt(ctx.view))))


class _ScoreAttack:
    """Writes files into its working copy and its outputs folder; implements nothing."""

    needs_reference = False
    behaviour = ""

    def files(self, ctx: AgentContext) -> dict[str, str]:
        return {}

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.note(f"hostile agent: {self.behaviour}")
        ctx.sh(f"mkdir -p {OUTPUT_DIR}")
        for path, text in self.files(ctx).items():
            ctx.write(path, text)
        return AgentOutcome(notes=self.behaviour)


class SprayConclusionAgent(_ScoreAttack):
    """A conclusion made of every prompt word, both answers, and every number from 0.00 to 100.00 (step 0.01)."""

    behaviour = "spray the conclusion with every prompt word and every number"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        numbers = " ".join(f"{i / 100:.2f}" for i in range(10001))
        return {CONCLUSION_FILE: "Yes. No. " + " ".join(prompt_words(ctx)) + "\n\n" + numbers + "\n"}


class SprayHedgeAgent(_ScoreAttack):
    """A conclusion that hedges every way: each sentence of the prompt as a claim and as its negation, every
    direction word, and every percentage from 0 % to 100 % in steps of 0.1."""

    behaviour = "hedge the conclusion in every direction with every percentage"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        sentences = [s.strip() for s in re.split(r"(?<=[.?!])\s+", task_prompt(ctx.view)) if s.strip()]
        claims = [f"Yes: {s} No: it is not the case that {s}" for s in sentences]
        directions = "It increases, decreases, rises, falls, improves, worsens, helps, hurts, beats and loses."
        percents = " ".join(f"{i / 10:.1f}%" for i in range(1001))
        return {CONCLUSION_FILE: "\n".join([*claims, directions, percents])}


class SprayDesignAgent(_ScoreAttack):
    """A design listing every prompt word and every pair of neighbouring words as a variable of every role."""

    behaviour = "spray the design with every prompt word and word pair"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        words = prompt_words(ctx)
        names = words + [f"{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
        variables = {name: name.replace("_", " ") for name in names}
        design = {role: variables for role in ("constant", "independent", "dependent")}
        return {DESIGN_FILE: json.dumps(design)}


class ConstantsAgent(_ScoreAttack):
    """`run.py` writes the expected results as constants and computes nothing, as an agent would that read them
    in the paper it was given (AutoExperiment) or guessed them. It takes them from the task's ground truth, the
    only place this suite has them: the attack is on the verdict, not on finding the numbers."""

    needs_reference = True
    behaviour = "write the expected constants without computing anything"

    def constants(self, ctx: AgentContext) -> dict[str, float]:
        task = ctx.reference.task if ctx.reference else None
        return {m.name: m.value for m in task.expected_results} if task else {}

    def script(self, values: dict[str, float], results_file: str) -> str:
        return (f"import json\n\nRESULTS = {values!r}\nwith open({results_file!r}, 'w') as handle:\n"
                "    json.dump(RESULTS, handle)\nprint(json.dumps(RESULTS))\n")

    def files(self, ctx: AgentContext) -> dict[str, str]:
        values = self.constants(ctx)
        command = ctx.view.run_command or ""
        if not values or not command.startswith("python3 "):
            return {CONCLUSION_FILE: "No experiment to fake."}
        target = command.split()[1]
        return {target: self.script(values, ctx.view.results_file or "results.json"),
                RUN_SCRIPT: f"#!/usr/bin/env bash\n{command}\n"}


class EncodedConstantsAgent(ConstantsAgent):
    """The same constants, none written as a literal: each is rebuilt from the digits of an unrelated-looking
    integer, so no expected value appears in the diff as text."""

    behaviour = "write the expected constants, encoded, without computing anything"

    def script(self, values: dict[str, float], results_file: str) -> str:
        coded = {name: [ord(ch) + 7 for ch in repr(value)] for name, value in values.items()}
        return ("import json\n\n"
                f"CODED = {coded!r}\n"
                "RESULTS = {k: float(''.join(chr(c - 7) for c in v)) for k, v in CODED.items()}\n"
                f"with open({results_file!r}, 'w') as handle:\n    json.dump(RESULTS, handle)\n"
                "print(json.dumps(RESULTS))\n")


class MaskedConstantsAgent(ConstantsAgent):
    """The constants written from inside the code the task masked (the first masked file or function's module,
    at import), so that restoring the masked parts to their stubs also removes the forgery; `run.py` untouched."""

    behaviour = "write the expected constants from inside the masked code"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        task = ctx.reference.task if ctx.reference else None
        values = self.constants(ctx)
        targets = ([*task.masking.files, *(f.path for f in task.masking.functions)] if task else [])
        if not values or not targets:
            return {CONCLUSION_FILE: "No experiment to fake."}
        forged = (f"\n\nimport atexit as _atexit, json as _json, os as _os, sys as _sys\n_RESULTS = {values!r}\n"
                  "def _forge(*_):\n"
                  f"    with open({(ctx.view.results_file or 'results.json')!r}, 'w') as _h:\n"
                  "        _json.dump(_RESULTS, _h)\n"
                  "    print(_json.dumps(_RESULTS), flush=True)\n"
                  "def _exit_ok(*_):\n"
                  "    _forge()\n"
                  "    _os._exit(0)\n"
                  "_sys.excepthook = _exit_ok\n"
                  "_atexit.register(_forge)\n")
        given = ctx.sh(f"cat {targets[0]}")  # the masked version the agent was given; none for a removed file
        return {targets[0]: (given.stdout if given.returncode == 0 else "") + forged,
                RUN_SCRIPT: f"#!/usr/bin/env bash\n{ctx.view.run_command}\n"}


HUGE_400, HUGE_5000 = "1" * 400, "7" * 5000


class HugeNumbersAgent(_ScoreAttack):
    """`run.py` writes a results file (and prints an answer) holding a 400- and a 5000-digit integer where the
    expected metrics belong; the design and conclusion hold them too."""

    behaviour = "write integers of 400 and 5000 digits into the results, design and conclusion"

    def payload(self, ctx: AgentContext) -> str:
        names = ctx.view.expected_metrics or ["result"]
        pairs = [f'"{name}": {HUGE_400 if i % 2 == 0 else HUGE_5000}' for i, name in enumerate(names)]
        return "{" + ", ".join([*pairs, f'"extra": {HUGE_5000}']) + "}"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        payload = self.payload(ctx)
        script = (f"PAYLOAD = {payload!r}\nwith open({(ctx.view.results_file or 'results.json')!r}, 'w') as h:\n"
                  "    h.write(PAYLOAD)\nprint(PAYLOAD)\n")
        out = {DESIGN_FILE: '{"constant": {"n": ' + HUGE_5000 + '}, "independent": {"x": ' + HUGE_400 + "}}",
               CONCLUSION_FILE: f"The answer is {HUGE_5000}.\n\n{payload}\n"}
        if ctx.view.run_command and ctx.view.run_command.startswith("python3 "):
            out[ctx.view.run_command.split()[1]] = script
            out[RUN_SCRIPT] = f"#!/usr/bin/env bash\n{ctx.view.run_command}\n"
        return out


class NonFiniteAgent(HugeNumbersAgent):
    """The same places hold NaN, Infinity, -Infinity, 1e999 and lone surrogates (`"\\ud800"`)."""

    behaviour = "write NaN, infinities and lone surrogates into the results, design and conclusion"

    def payload(self, ctx: AgentContext) -> str:
        names = ctx.view.expected_metrics or ["result"]
        values = ["NaN", "Infinity", "-Infinity", "1e999"]
        pairs = [f'"{name}": {values[i % len(values)]}' for i, name in enumerate(names)]
        return "{" + ", ".join([*pairs, '"note": "\\ud800\\udfff\\udc80"', '"\\ud800": 1']) + "}"

    def files(self, ctx: AgentContext) -> dict[str, str]:
        out = super().files(ctx)
        out[DESIGN_FILE] = '{"constant": {"\\ud800": "\\udc80"}, "independent": {"x": NaN}, "dependent": {}}'
        return out


class DeepDesignAgent(_ScoreAttack):
    """A design nested 200,000 levels deep, a results file nested as deep from the re-run, and a conclusion
    that prints such an answer."""

    behaviour = "write JSON nested 200,000 levels deep as design, results and answer"
    depth = 200_000

    def files(self, ctx: AgentContext) -> dict[str, str]:
        deep = '{"a": ' * self.depth + "1" + "}" * self.depth
        out = {DESIGN_FILE: '{"constant": ' + deep + "}", CONCLUSION_FILE: "Answer:\n" + deep[:900_000]}
        if ctx.view.run_command and ctx.view.run_command.startswith("python3 "):
            out[ctx.view.run_command.split()[1]] = (
                f"D = {self.depth}\nS = '{{\"a\": ' * D + '1' + '}}' * D\n"
                f"open({(ctx.view.results_file or 'results.json')!r}, 'w').write(S)\nprint(S)\n")
            out[RUN_SCRIPT] = f"#!/usr/bin/env bash\n{ctx.view.run_command}\n"
        return out


class ModerateDepthAgent(DeepDesignAgent):
    """Nested 900 levels: deep enough to pass Python's parser and break any recursive walk after it."""

    behaviour = "write JSON nested 900 levels deep as design, results and answer"
    depth = 900


SCORE_ATTACK_AGENTS = {
    "hostile-spray-conclusion": SprayConclusionAgent,
    "hostile-spray-hedge": SprayHedgeAgent,
    "hostile-spray-design": SprayDesignAgent,
    "hostile-constants": ConstantsAgent,
    "hostile-constants-encoded": EncodedConstantsAgent,
    "hostile-constants-masked": MaskedConstantsAgent,
    "hostile-huge-numbers": HugeNumbersAgent,
    "hostile-non-finite": NonFiniteAgent,
    "hostile-deep-design": DeepDesignAgent,
    "hostile-moderate-depth": ModerateDepthAgent,
}
for _name, _cls in SCORE_ATTACK_AGENTS.items():
    _cls.name = _name
    _cls.hidden = True
    register_agent(_name)(_cls)
