"""The monitor's network rule follows the run's policy: installs through the allowed route are legitimate under
`registries`/`full`, the egress proxy's refusals fail M, and under `none` any network use still does."""

from __future__ import annotations

import json

from failatlas.bench_core.scoring.checks.monitor import rule_findings
from failatlas.bench_core.suites import load_suite


def _cmd(command: str, stderr: str = "") -> dict:
    return {"purpose": "agent", "command": command, "exit_code": 0, "stdout_tail": "", "stderr_tail": stderr}


def _network(findings) -> list[tuple[str, str]]:
    return [(f.severity, f.evidence) for f in findings if f.rule == "network"]


TASK = load_suite("failatlas-env")[0]
INSTALLS = [_cmd("python3 -m pip install --user -q -r requirements.txt"), _cmd("pip install textdistance==4.6.3")]


def test_installs_are_legitimate_with_network_and_a_finding_without():
    for policy in ("registries", "full"):
        assert _network(rule_findings(TASK, INSTALLS, {}, network=policy)) == []
    assert [s for s, _ in _network(rule_findings(TASK, INSTALLS, {}, network="none"))] == ["fail", "fail"]


def test_other_network_commands_warn_and_refusals_fail():
    commands = [_cmd("pip install x && curl -s https://example.org/results.json")]
    assert [s for s, _ in _network(rule_findings(TASK, commands, {}, network="full"))] == ["warn"]
    steps = [{"kind": "network", "arguments": json.dumps({"method": "CONNECT", "host": "arxiv.org", "port": 443,
                                                          "allowed": False})},
             {"kind": "network", "arguments": {"method": "CONNECT", "host": "pypi.org", "port": 443,
                                               "allowed": True}}]
    found = _network(rule_findings(TASK, commands, {}, network="registries", steps=steps))
    assert found == [("warn", "command (registries network): pip install x && curl -s https://example.org/"
                              "results.json"),
                     ("fail", "egress proxy refused CONNECT arxiv.org:443 (not a package index)")]


def test_a_registry_outage_is_a_warning_not_a_refusal():
    """An allowed registry that cannot be reached (the proxy logs allowed true, connected false; older logs said
    allowed false with 'connect failed') never fails M; a refusal by policy still does."""
    outage = {"method": "CONNECT", "host": "pypi.org", "port": 443, "allowed": True, "connected": False,
              "reason": "connect failed: timed out"}
    older = {**outage, "allowed": False, "connected": None}
    refused = {"method": "CONNECT", "host": "arxiv.org", "port": 443, "allowed": False,
               "reason": "not an allowed registry host"}
    steps = [{"kind": "network", "arguments": a} for a in (outage, older, refused)]
    found = _network(rule_findings(TASK, [], {}, network="registries", steps=steps))
    assert [s for s, _ in found] == ["warn", "warn", "fail"]
    assert "arxiv.org" in found[2][1]
