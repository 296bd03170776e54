"""The egress proxy of the `registries` policy, run in this process against real local servers: allowed hosts pass
(HTTP and CONNECT), others get 403, every decision is logged, and with an upstream proxy it chains through it."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox.egress_proxy import Proxy, allowed


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._send(f"hello {self.path}".encode())

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _serve(server) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


@pytest.fixture
def origin() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    _serve(server)
    yield server.server_address[1]
    server.shutdown()


def _proxy(tmp_path: Path, name: str, allow: list[str], upstream: str | None = None) -> tuple[Proxy, Path]:
    log = tmp_path / f"{name}.log"
    proxy = Proxy(("127.0.0.1", 0), allow, str(log), upstream)
    _serve(proxy)
    return proxy, log


def _get(proxy: Proxy, url: str) -> tuple[int, str]:
    port = proxy.server_address[1]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{port}"}))
    try:
        with opener.open(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _connect(proxy: Proxy, target: str) -> bytes:
    with socket.create_connection(proxy.server_address, timeout=10) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        reply = sock.recv(4096)
        if b" 200 " in reply.split(b"\r\n", 1)[0]:
            sock.sendall(b"GET /tunnel HTTP/1.0\r\nHost: x\r\n\r\n")
            while chunk := sock.recv(4096):
                reply += chunk
        return reply


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_allowlist_matching():
    assert allowed("pypi.org", ["pypi.org"]) and allowed("PyPI.org.", ["pypi.org"])
    assert allowed("a.b.example.org", ["*.example.org"]) and not allowed("example.org", ["*.example.org"])
    assert not allowed("pypi.org.evil.com", ["pypi.org"]) and not allowed("evilpypi.org", ["*.pypi.org"])


def test_allowed_hosts_pass_and_others_are_refused(tmp_path: Path, origin: int):
    proxy, log = _proxy(tmp_path, "proxy", [f"127.0.0.1:{origin}"])
    try:
        assert _get(proxy, f"http://127.0.0.1:{origin}/simple/") == (200, "hello /simple/")
        status, body = _get(proxy, f"http://localhost:{origin}/paper.pdf")
        assert status == 403 and "refused by the sandbox's network policy" in body
        assert b"hello /tunnel" in _connect(proxy, f"127.0.0.1:{origin}")
        refused = _connect(proxy, "arxiv.org:443")
        assert refused.startswith(b"HTTP/1.1 403")
    finally:
        proxy.shutdown()
        proxy.server_close()
    entries = [(e["method"], e["host"], e["allowed"]) for e in _log(log)]
    assert entries == [("GET", "127.0.0.1", True), ("GET", "localhost", False), ("CONNECT", "127.0.0.1", True),
                       ("CONNECT", "arxiv.org", False)]


def test_chains_through_the_hosts_upstream_proxy(tmp_path: Path, origin: int):
    upstream, upstream_log = _proxy(tmp_path, "upstream", [f"127.0.0.1:{origin}"])
    port = upstream.server_address[1]
    proxy, log = _proxy(tmp_path, "egress", [f"127.0.0.1:{origin}"], upstream=f"http://user:pw@127.0.0.1:{port}")
    try:
        assert _get(proxy, f"http://127.0.0.1:{origin}/x") == (200, "hello /x")
        assert b"hello /tunnel" in _connect(proxy, f"127.0.0.1:{origin}")
        assert _connect(proxy, "example.org:443").startswith(b"HTTP/1.1 403")
    finally:
        for server in (proxy, upstream):
            server.shutdown()
            server.server_close()
    # the upstream saw exactly the allowed connections; the refused one never left the egress proxy
    assert [(e["method"], e["allowed"]) for e in _log(upstream_log)] == [("GET", True), ("CONNECT", True)]
    assert [e["allowed"] for e in _log(log)] == [True, True, False]


def test_a_flood_of_allowed_requests_cannot_hide_a_refusal(tmp_path, origin, monkeypatch):
    """An agent that floods the proxy after a refused request must neither push the refusal out of the log the harness
    reads nor fill the sidecar's disk: refusals keep their first lines in `<log>.denied`, the main log is capped."""
    from failatlas.bench_core.sandbox import egress_proxy

    monkeypatch.setattr(egress_proxy, "MAX_LOG_BYTES", 2000)
    proxy, log = _proxy(tmp_path, "flood", [f"127.0.0.1:{origin}"])
    try:
        assert _get(proxy, "http://results.example.org/answers.json")[0] == 403
        for k in range(40):
            assert _get(proxy, f"http://127.0.0.1:{origin}/{k}")[0] == 200
        assert _get(proxy, "http://second.example.org/")[0] == 403  # after the cap: refused, and still recorded
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert log.stat().st_size <= 2000 + 300  # the cap plus one marker line
    assert "log full" in log.read_text()
    denied = [e["host"] for e in _log(Path(str(log) + ".denied"))]
    assert denied == ["results.example.org", "second.example.org"]


def test_ports_bare_names_get_443_for_connect_and_80_for_http_only():
    assert allowed("pypi.org", ["pypi.org"], 443, connect=True)
    assert not allowed("pypi.org", ["pypi.org"], 22, connect=True)
    assert not allowed("pypi.org", ["pypi.org"], 443, connect=False) and allowed("pypi.org", ["pypi.org"], 80, False)
    assert allowed("mirror.example.org", ["mirror.example.org:8080"], 8080, connect=True)
    assert not allowed("mirror.example.org", ["mirror.example.org:8080"], 443, connect=True)


def test_connect_to_an_allowed_host_on_another_port_is_refused(tmp_path: Path, origin: int):
    proxy, log = _proxy(tmp_path, "ports", ["127.0.0.1"])
    try:
        assert _connect(proxy, f"127.0.0.1:{origin}").startswith(b"HTTP/1.1 403")
        assert _get(proxy, f"http://127.0.0.1:{origin}/x")[0] == 403
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert [e["allowed"] for e in _log(log)] == [False, False]


def test_an_unreachable_allowed_host_is_logged_allowed_but_not_connected(tmp_path: Path):
    """A registry outage is not a refusal: allowed true, connected false, reason kept; nothing in `.denied`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed when the block ends: nothing listens there
    proxy, log = _proxy(tmp_path, "outage", [f"127.0.0.1:{dead}"])
    try:
        reply = _connect(proxy, f"127.0.0.1:{dead}")
        assert reply.startswith(b"HTTP/1.1 502") and b"cannot reach" in reply
    finally:
        proxy.shutdown()
        proxy.server_close()
    [entry] = _log(log)
    assert entry["allowed"] is True and entry["connected"] is False and entry["reason"].startswith("connect failed")
    assert not Path(str(log) + ".denied").exists()


class _Echo(_Hello):
    """Answers with every request line it saw on the connection and the Host header."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._answer()

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        self._send(f"{self.requestline}|host={self.headers.get('Host')}".encode())


def _raw(proxy: Proxy, data: bytes) -> bytes:
    with socket.create_connection(proxy.server_address, timeout=10) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        return reply


def test_plain_http_is_rebuilt_not_relayed(tmp_path: Path):
    """Host is rewritten to the checked host, bad targets and chunked or ambiguous bodies get 400, and a second
    request smuggled after the declared body never reaches the origin (or the upstream proxy)."""
    seen: list[str] = []

    class Recorder(_Echo):
        def _answer(self) -> None:
            seen.append(self.requestline)
            super()._answer()

    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    _serve(origin)
    port = origin.server_address[1]
    upstream, _ = _proxy(tmp_path, "up", [f"127.0.0.1:{port}"])
    proxy, _ = _proxy(tmp_path, "front", [f"127.0.0.1:{port}"], upstream=f"http://127.0.0.1:{upstream.server_address[1]}")
    url = f"http://127.0.0.1:{port}"
    try:
        reply = _raw(proxy, f"GET {url}/a HTTP/1.1\r\nHost: internal.example\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.0 200") and f"host=127.0.0.1:{port}".encode() in reply
        smuggle = (f"POST {url}/b HTTP/1.1\r\nContent-Length: 2\r\n\r\nok"
                   f"GET http://results.example.org/answers HTTP/1.1\r\nHost: x\r\n\r\n").encode()
        assert _raw(proxy, smuggle).startswith(b"HTTP/1.0 200")
        for bad in (f"GET {url}/a\\@evil HTTP/1.1\r\n\r\n", f"GET {url}/a#x HTTP/1.1\r\n\r\n",
                    f"POST {url}/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                    f"POST {url}/c HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                    f"GET {url}/c HTTP/1.1\r\n X-Folded: 1\r\n\r\n"):
            assert _raw(proxy, bad.encode()).startswith(b"HTTP/1.1 400"), bad
    finally:
        for server in (proxy, upstream, origin):
            server.shutdown()
            server.server_close()
    assert seen == ["GET /a HTTP/1.1", "POST /b HTTP/1.1"]
