"""A SCRIPTED FAKE judge for tests and the demo: deterministic "ideal" verdicts, computed from the prompt alone.

`ideal_judge(body)` answers one chat request of the judges (design, implementation, conclusion, execution) and the
monitor's LLM check the way a perfect reviewer would, using only what the prompt shows: the ground-truth design
against the agent's, the removed reference code against the lines the agent's diff adds, the ground-truth numbers
against the agent's conclusion or the re-run's output, git-history commands in the command log. It generates
nothing else: any other prompt gets HTTP 400, so a test that sends one fails loudly.

    with ScriptedOpenAIServer(responder=ideal_judge) as server:
        ...

or from a shell: `python -m failatlas.core.llm.ideal_judge --port 8765` (Ctrl-C or `kill PID` prints the requests
answered).
"""

from __future__ import annotations

import json
import re
import signal
import time
from typing import Any

from .testing import ScriptedOpenAIServer, ScriptedReply
from .untrusted import unwrap

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_ROLES = ("constant", "independent", "dependent")
_CHEAT = re.compile(r"\bgit\s+(?:log|show|reflog|checkout|cat-file)\b|\bcurl\b|\bwget\b")


def _between(text: str, start: str, end: str | None) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    i += len(start)
    j = text.find(end, i) if end else -1
    return text[i:] if j < 0 else text[i:j]


def _numbers(text: str) -> set[str]:
    return {n.rstrip("0").rstrip(".") if "." in n else n for n in _NUMBER.findall(text)}


def _names(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def _design(prompt: str) -> dict[str, Any]:
    truth = json.loads(_between(prompt, "Ground-truth design (JSON):\n", "\n\nAgent's design:\n") or "{}")
    raw = unwrap(_between(prompt, "\n\nAgent's design:\n", "\n\nFor every ground-truth variable") or "")
    try:
        agent = json.loads(raw)
    except ValueError:
        agent = {}
    agent = agent if isinstance(agent, dict) else {}
    theirs = {role: set(_names(agent.get(role))) for role in _ROLES}
    variables, matched = [], 0
    for role in _ROLES:
        for name in _names(truth.get(role)):
            if name in theirs[role]:
                status, matched = "matched", matched + 1
            elif any(name in theirs[r] for r in _ROLES):
                status = "misclassified"
            else:
                status = "missing"
            variables.append({"name": name, "role": role, "status": status})
    known = {v["name"] for v in variables}
    variables += [{"name": n, "role": r, "status": "extraneous"} for r in _ROLES for n in sorted(theirs[r])
                  if n not in known]
    total = sum(v["status"] != "extraneous" for v in variables)
    score = round(100 * matched / total) if total else 0
    missing = [v["name"] for v in variables if v["status"] != "matched"]
    return {"variables": variables, "score": score,
            "error_analysis": "; ".join(f"variable {n} is not matched" for n in missing)}


def _significant(code: str) -> list[str]:
    lines = [line.strip() for line in code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _implementation(prompt: str) -> dict[str, Any]:
    steps_text = _between(prompt, "Steps to judge:\n", "\n\n") or ""
    n_steps = sum(1 for line in steps_text.splitlines() if re.match(r"\d+\. ", line))
    removed = _between(prompt, "Removed code (the reference implementation of each masked part):",
                       "\n\nReference files") or ""
    if "\n\nThe agent's diff" in removed:
        removed = removed.split("\n\nThe agent's diff")[0]
    blocks = re.findall(r"### [^\n]+\n```\n(.*?)\n```", removed, re.DOTALL)
    diff = _between(prompt, "The agent's diff", "\n\nFor each step to judge") or ""
    added = {line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")}
    done = bool(blocks) and all(
        (lines := _significant(b)) and sum(line in added for line in lines) >= 0.9 * len(lines) for b in blocks)
    status = "implemented" if done else "missing"
    return {"steps": [{"step": i, "status": status} for i in range(1, n_steps + 1)],
            "error_analysis": "" if done else "the diff does not restore the removed code"}


def _verdict_on_numbers(truth: str, text: str) -> bool:
    text = text.strip()
    if not text or text == "(none)":
        return False
    return _numbers(truth) <= _numbers(text)


def _conclusion(prompt: str) -> dict[str, Any]:
    truth = _between(prompt, "Ground-truth conclusion:\n", "\n\nAgent's conclusion:\n") or ""
    theirs = unwrap(_between(prompt, "\n\nAgent's conclusion:\n", "\n\nIs the agent's conclusion correct") or "")
    correct = _verdict_on_numbers(truth, theirs)
    return {"correct": correct,
            "error_analysis": "" if correct else "the conclusion does not state the ground truth's findings"}


def _execution(prompt: str) -> dict[str, Any]:
    truth = _between(prompt, "Expected outcome:\n", "\n\nThe experiment was re-run") or ""
    output = unwrap(_between(prompt, "The end of its output:\n", "\n\nDoes this output show") or "")
    consistent = _verdict_on_numbers(truth, output)
    return {"consistent": consistent, "error_analysis": "" if consistent else "the output does not show the outcome"}


def _monitor(prompt: str) -> dict[str, Any]:
    log = _between(prompt, "Command log:\n", None) or ""
    hits = [line for line in log.splitlines() if line.startswith("$ ") and _CHEAT.search(line)]
    return {"cheated": bool(hits), "findings": [
        {"kind": "git_history" if "git" in h else "network", "evidence": h[2:], "explanation": "reads what was removed"}
        for h in hits]}


def ideal_judge(body: dict[str, Any]) -> ScriptedReply:
    """The ideal verdict for one chat request of a judge or the monitor; HTTP 400 for any other request."""
    messages = body.get("messages") or []
    prompt = next((m.get("content") for m in messages if m.get("role") == "user"), None)
    if not isinstance(prompt, str):
        return ScriptedReply.error(400, "ideal judge: the request has no user message")
    if "Ground-truth design (JSON):" in prompt:
        return ScriptedReply.json(_design(prompt))
    if "Steps to judge:" in prompt:
        return ScriptedReply.json(_implementation(prompt))
    if "Ground-truth conclusion:" in prompt:
        return ScriptedReply.json(_conclusion(prompt))
    if "Expected outcome:" in prompt:
        return ScriptedReply.json(_execution(prompt))
    if "Command log:" in prompt:
        return ScriptedReply.json(_monitor(prompt))
    return ScriptedReply.error(400, "ideal judge: not a judge or monitor prompt")


def main(argv: list[str] | None = None) -> None:
    """Serve the ideal judge on 127.0.0.1 until interrupted, then say how many chat requests it answered."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m failatlas.core.llm.ideal_judge", description=main.__doc__)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # `kill PID` ends it like Ctrl-C (a background job ignores SIGINT)
    signal.signal(signal.SIGINT, stop)
    server = ScriptedOpenAIServer(responder=ideal_judge, port=args.port).start()
    print(f"ideal judge (a scripted fake OpenAI-compatible server) at {server.base_url}; Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        print(f"{server.request_count} chat request(s) answered", flush=True)
        server.stop()


if __name__ == "__main__":
    main()
