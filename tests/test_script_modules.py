"""The product's modules that run as scripts in other processes (copied beside the hidden-test judge or into a
sandbox, or started as a server or a setup step), checked in this process, in the README's quick command: the
slow tests run them end to end in sandboxes; these pin each one's own behaviour cheaply."""

from __future__ import annotations

import importlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def hidden(monkeypatch: pytest.MonkeyPatch):
    """Import a hidden-test script as the judge's folder holds it: `wire.py` as `failatlas_wire`, `compare.py` as
    `failatlas_compare`."""
    from failatlas.bench_core.hidden import compare, wire

    monkeypatch.setitem(sys.modules, "failatlas_wire", wire)
    monkeypatch.setitem(sys.modules, "failatlas_compare", compare)
    return lambda name: importlib.import_module(f"failatlas.bench_core.hidden.{name}")


def _peer(fixture, replies: list[bytes], requests: list[object]):
    """A harness stand-in on real pipes: reads each request frame, answers with the next raw reply."""
    to_judge_r, to_judge_w = os.pipe()
    to_peer_r, to_peer_w = os.pipe()

    def serve() -> None:
        peer = fixture.Channel(to_judge_w, to_peer_r)
        for raw in replies:
            requests.append(sys.modules["failatlas_wire"].decode(peer.receive("request")))
            os.write(to_judge_w, fixture.HEADER.pack(fixture.DONE, len(raw)) + raw)

    threading.Thread(target=serve, daemon=True).start()
    return fixture.Agent(fixture.Channel(to_peer_w, to_judge_r))


def test_the_agent_fixture_sends_calls_and_turns_replies_into_values_or_the_agents_errors(hidden):
    fixture, wire = hidden("fixture"), sys.modules["failatlas_wire"]
    too_large = b"x" * (fixture.MAX_FRAME + 1)
    replies = [wire.encode({"ok": True, "value": [1.5, 2]}),
               wire.encode({"ok": False, "error": {"exception": "ZeroDivisionError", "object": "m.py::f",
                                                   "message": "division by zero"}}),
               too_large,
               wire.encode("not a reply"),
               wire.encode({"ok": True, "value": 7})]
    requests: list[object] = []
    agent = _peer(fixture, replies, requests)
    assert agent.call("m:f", 3, k=4) == [1.5, 2]
    with pytest.raises(fixture.AgentError) as err:
        agent.run("result = 1 / 0", x=1)
    assert (err.value.exception, err.value.object, err.value.message) == ("ZeroDivisionError", "m.py::f",
                                                                         "division by zero")
    with pytest.raises(fixture.AgentError, match="ReplyTooLarge"):
        agent.call("m:g")
    with pytest.raises(fixture.AgentError, match="MalformedReply"):
        agent.call("m:h")
    assert agent.call("m:i") == 7  # the oversized frame was read off: the channel stayed in step
    assert requests[0] == {"op": "call", "target": "m:f", "args": [3], "kwargs": {"k": 4}}
    assert requests[1] == {"op": "run", "code": "result = 1 / 0", "inputs": {"x": 1}}
    with pytest.raises(ValueError, match="not 'module:qualname'"):
        agent.call("no_colon")


def test_a_derived_test_file_carries_its_cases_and_labels_them(hidden):
    from failatlas.bench_core.hidden.record import replay_source

    case = {"id": "c1", "qualname": "Ridge.fit", "perturbed": True, "number": 4}
    first = replay_source([case]).splitlines()[0]
    namespace = {"__name__": "derived"}
    exec(first, namespace)  # the generated file's first line: CASES_DATA = "<base64 of zlib of wire data>"
    replay = hidden("replay")
    assert replay.CASES == []  # the module as shipped carries no cases
    assert replay._cases(namespace["CASES_DATA"]) == [case]
    assert replay._label(case) == "Ridge.fit (perturbed call 4)"


def test_the_judge_reports_one_clean_line_per_failure(hidden):
    judge = hidden("judge_main")
    assert judge._line("first\x1b[31m red\u2028line\nsecond") == "first [31m red line"
    long = "word " * 100
    cut = judge._line(long, limit=50)
    assert cut.endswith(" ...") and len(cut) <= 54 and "wor ..." not in cut


def test_the_recorder_perturbs_numbers_and_float_arrays_only(hidden):
    recorder = hidden("recorder")
    rng = np.random.default_rng(0)
    inputs = {"args": [3, 2.0, True, "s"], "kwargs": {"seed": 7, "flag": False}, "state": {"n": 5}}
    shifted = recorder._scalars_shifted(inputs, 2, rng)
    assert shifted["args"][0] == 6 and 1.4 <= shifted["args"][1] <= 2.6 and shifted["args"][2:] == [True, "s"]
    assert shifted["kwargs"] == {"seed": 10, "flag": False} and shifted["state"] == {"n": 5}
    values = {"x": np.arange(6, dtype=np.float32), "i": np.arange(3), "nested": [np.ones(2)], "t": "text"}
    out = recorder._perturbed(values, rng, np)
    assert out["x"].dtype == np.float32 and not np.allclose(out["x"], values["x"])
    assert out["i"] is values["i"] and out["t"] == "text" and not np.allclose(out["nested"][0], 1.0)


def test_the_judge_fork_server_drops_what_a_judges_folders_would_have_shadowed(tmp_path: Path, monkeypatch):
    """`judge_fork._shadowed`: a module the server imported after its start whose name a file or package of the
    judge's folders holds is dropped (a fresh judge would import that folder's), a built-in module and one a fresh
    interpreter already holds are not, nor a folder that is no package."""
    server = importlib.import_module("failatlas.bench_core.hidden.judge_fork")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fa_probe_mod.py").write_text("X = 1\n")
    (lib / "fa_probe_pkg").mkdir()
    (lib / "fa_probe_pkg" / "__init__.py").write_text("")
    (lib / "fa_probe_pkg" / "inner.py").write_text("")
    monkeypatch.syspath_prepend(str(lib))
    for name in ("fa_probe_mod", "fa_probe_pkg", "fa_probe_pkg.inner"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    judge = tmp_path / "judge"
    (judge / "fa_probe_pkg").mkdir(parents=True)
    (judge / "fa_probe_pkg" / "__init__.py").write_text("")
    (judge / "not_a_package").mkdir()
    for name in ("fa_probe_mod.py", "sys.py", "os.py"):
        (judge / name).write_text("")
    assert sorted(server._shadowed([str(judge), str(tmp_path / "missing")])) == [
        "fa_probe_mod", "fa_probe_pkg", "fa_probe_pkg.inner"]


def test_the_forwarder_relays_each_connection_to_the_unix_socket_and_passes_the_half_close_on(tmp_path: Path):
    from failatlas.bench_core.sandbox import bwrap_forward

    path = str(tmp_path / "proxy.sock")
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    upstream.bind(path)
    upstream.listen(4)

    def echo_upper() -> None:  # the egress proxy's stand-in: reads to the end, answers, closes
        conn, _ = upstream.accept()
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
        conn.sendall(data.upper())
        conn.close()

    threading.Thread(target=echo_upper, daemon=True).start()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    threading.Thread(target=bwrap_forward._serve, args=(listener, path), daemon=True).start()
    with socket.create_connection(listener.getsockname(), timeout=10) as client:
        client.sendall(b"connect example.org:443")
        client.shutdown(socket.SHUT_WR)  # reaches the proxy as its end of input
        got = b""
        while chunk := client.recv(4096):
            got += chunk
    assert got == b"CONNECT EXAMPLE.ORG:443"


def test_the_reaper_exits_as_its_command_did_and_kills_what_the_command_left(tmp_path: Path):
    from failatlas.bench_core.sandbox import reaper

    pid_file = tmp_path / "pid"
    script = f"setsid sleep 300 & echo $! > {pid_file}; exit 3"
    done = subprocess.run([sys.executable, "-I", "-S", reaper.__file__, "sh", "-c", script], timeout=60)
    assert done.returncode == 3
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the abandoned sleep {pid} outlived the reaper")
    missing = subprocess.run([sys.executable, "-I", "-S", reaper.__file__, "no-such-command-here"], timeout=60,
                             capture_output=True, text=True)
    assert missing.returncode == 127 and "no-such-command-here" in missing.stderr


def test_the_app_server_preloads_what_its_pages_import_and_names_what_it_could_not():
    from failatlas.appdata import serve

    assert serve.preload() == []
    assert all(name in sys.modules for name in serve.PRELOAD)
    failed = serve.preload(("json", "failatlas.no_such_module"))
    assert len(failed) == 1 and failed[0].startswith("failatlas.no_such_module: ModuleNotFoundError")


def test_the_gpu_check_fails_with_the_reason_on_a_host_without_gpus(capsys: pytest.CaptureFixture[str]):
    from failatlas.bench_core.sandbox import gpucheck
    from failatlas.bench_core.sandbox.gpus import detect_gpus

    if detect_gpus():
        pytest.skip("this host has GPUs: the device check itself runs there (docs/sandbox.md)")
    with pytest.raises(SystemExit) as ended:
        gpucheck.main([])
    assert ended.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["runs"] == [] and "no GPU on this host" in report["problem"]


def test_setup_compiles_the_clustering_paths_that_numba_compiles():
    """scripts/setup.sh runs `precompile`, whose points are above the size where UMAP runs in numpy (which compiles
    nothing): the numba paths a user's clustering takes. Running it is the slow test below."""
    import inspect

    from failatlas.cluster import warmup
    from failatlas.cluster.umap_numpy import NUMPY_UMAP_MAX

    setup = (Path(__file__).resolve().parents[1] / "scripts" / "setup.sh").read_text()
    assert "from failatlas.cluster.warmup import precompile; precompile()" in setup
    sizes = [int(n.replace("_", "")) for n in re.findall(r"\b\d[\d_]{3,}\b", inspect.getsource(warmup.precompile))]
    assert sizes and min(sizes) > NUMPY_UMAP_MAX


@pytest.mark.slow
def test_setup_warmup_fills_numbas_file_cache():
    """After scripts/setup.sh, the compiled clustering code comes from numba's file cache (hits). Measured
    2026-12-07: 9 hits, 7 misses (functions numba compiles again in each process), 19 s on an idle core (47 s
    before the warm-up's fits ran a few epochs instead of the full number)."""
    from failatlas.cluster.warmup import precompile

    stats = precompile()
    assert stats["functions"] > 0 and stats["hits"] > 0, stats
