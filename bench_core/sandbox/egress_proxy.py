"""The egress proxy of the `registries` network policy: an HTTP(S) proxy that lets through only allowed host names.

Standard library only: it runs as `python3 egress_proxy.py ...` in a sidecar started from the sandbox base image
(`egress.py`), never imported by the harness's process. HTTPS goes through CONNECT (the TLS stays end to end); plain
HTTP (Debian mirrors) through absolute-URI requests. A host is allowed when it equals an allowed name or, for
`*.domain`, ends with `.domain`; IP literals only when listed. Ports: an entry `name` allows CONNECT to 443 and plain
HTTP to 80 only; an entry `name:port` allows that port (either way). With `--upstream` (the host's own proxy) every
allowed connection is chained through it.

Plain HTTP is parsed, never relayed raw: the target must be a clean absolute http:// URL (no '\\', '@', '#',
whitespace or control characters), the request is rebuilt from its parsed parts with `Host` set to the checked host,
only the declared Content-Length body is forwarded (Transfer-Encoding or conflicting lengths: 400), and the
connection closes after one response, so nothing can be smuggled to the upstream proxy or the origin.

With `--unix PATH` it listens on a unix socket instead (the bwrap kind's host-side proxy, reached from a sandbox's
empty network namespace only through that socket); `--refuse-private` then resolves each allowed name itself and
refuses it when any address is loopback, private, link-local, carrier-grade NAT, multicast, unspecified or one of
the host's own (it runs in the host's network namespace), connecting to the address it checked (no second lookup
to rebind); `--parent PID` ends it when that process is gone.

Each decision is one JSON line in `--log`: {"ts", "method", "host", "port", "allowed", "connected", "reason"}.
`allowed` is the policy's verdict; an allowed connection whose upstream cannot be reached (a registry outage) is
`allowed: true, connected: false`, never a refusal. Only refusals by the policy go to `<log>.denied`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ipaddress
import json
import os
import re
import selectors
import socket
import socketserver
import threading
import time
from urllib.parse import unquote, urlsplit

MAX_HEAD = 64 * 1024
MAX_LOG_BYTES = 16 * 1024 * 1024  # of the sidecar's 64 MiB /tmp
MAX_DENIED_BYTES = 1024 * 1024
IDLE_S = 300.0
REFUSED = "not an allowed registry host"
_TOKEN = re.compile(r"^[A-Z]{1,20}$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9.-]{1,253}$|^\[[0-9A-Fa-f:.]{2,45}\]$")
_BAD_TARGET = re.compile(r"[\\@#\s\x00-\x1f\x7f]")
_NOT_PUBLIC = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
    "224.0.0.0/4", "255.255.255.255/32", "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8"))


def non_public(address: str) -> bool:
    """Whether `address` is loopback, private (RFC 1918, ULA), carrier-grade NAT, link-local (cloud metadata),
    multicast or unspecified; IPv4-mapped IPv6 addresses are judged as their IPv4 address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in _NOT_PUBLIC)


def host_address(address: str) -> bool:
    """Whether `address` is one of this host's own (a socket can be bound to it), whatever its range."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        s.bind((address, 0))
        return True
    return False


def _entry(name: str) -> tuple[str, int | None]:
    """An allowlist entry as (name, port); port None for a bare name."""
    if name.startswith("["):
        host, _, rest = name[1:].partition("]")
        return host, int(rest[1:]) if rest[1:].isdigit() else None
    host, sep, port = name.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return name, None


def allowed(host: str, allow: list[str], port: int | None = None, connect: bool = True) -> bool:
    """Whether `host` (and `port`, when given) is one of `allow`: exact names or `*.domain` for its subdomains; a
    bare name allows port 443 for CONNECT and 80 for plain HTTP, `name:port` exactly that port."""
    host = host.lower().rstrip(".").strip("[]")
    for item in allow:
        name, only = _entry(item)
        if not (host == name or (name.startswith("*.") and host.endswith(name[1:]))):
            continue
        if port is None or port == (only if only is not None else (443 if connect else 80)):
            return True
    return False


def _split_hostport(text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    return host, int(port) if port.isdigit() else default_port


class Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    refuse_private = False

    def __init__(self, address: tuple[str, int] | str, allow: list[str], log_path: str, upstream: str | None) -> None:
        super().__init__(address, Handler)
        self.allow = allow
        self.log_path = log_path
        self.upstream = urlsplit(upstream) if upstream else None
        self.lock = threading.Lock()
        self.log_bytes = self.denied_bytes = 0
        self.log_full = False

    def log(self, method: str, host: str, port: int, ok: bool, reason: str, connected: bool | None = None) -> None:
        """Append one decision (`connected` False: allowed, but the upstream could not be reached). Refusals by the
        policy also go to `<log>.denied`, which keeps the FIRST MAX_DENIED_BYTES: a
        sandbox that floods the proxy with allowed requests can neither push its refusals out of the log the harness
        reads back nor fill the proxy's disk (the main log stops at MAX_LOG_BYTES, with one marker line)."""
        entry = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "method": method, "host": host[:255],
                 "port": port, "allowed": ok, "reason": reason}
        if connected is not None:
            entry["connected"] = connected
        line = json.dumps(entry) + "\n"
        with self.lock, contextlib.suppress(OSError):  # a log that cannot be written never lets a request through
            if not ok and self.denied_bytes + len(line) <= MAX_DENIED_BYTES:
                with open(self.log_path + ".denied", "a") as f:
                    f.write(line)
                self.denied_bytes += len(line)
            if self.log_bytes + len(line) <= MAX_LOG_BYTES:
                with open(self.log_path, "a") as f:
                    f.write(line)
                self.log_bytes += len(line)
            elif not self.log_full:
                self.log_full = True
                with open(self.log_path, "a") as f:
                    f.write(json.dumps({**entry, "method": "-", "host": "-", "port": 0, "allowed": ok,
                                        "reason": "log full: later decisions kept only when refused"}) + "\n")

    def upstream_auth(self) -> bytes:
        up = self.upstream
        if up is None or not up.username:
            return b""
        token = base64.b64encode(f"{unquote(up.username)}:{unquote(up.password or '')}".encode())
        return b"Proxy-Authorization: Basic " + token + b"\r\n"


class UnixProxy(Proxy):
    """The same proxy on a unix socket (its address a path)."""

    address_family = socket.AF_UNIX

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        """A request it could not serve (out of threads under a flood) is dropped without a traceback: nothing a
        sandbox sends grows a file on the host beyond the bounded decision logs."""


class Handler(socketserver.BaseRequestHandler):
    server: Proxy

    def handle(self) -> None:
        client = self.request
        client.settimeout(30)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = client.recv(8192)
                if not chunk:
                    return
                head += chunk
                if len(head) > MAX_HEAD:
                    return
        except OSError:
            return
        head, _, rest = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._reply(400, "malformed request line")
            return
        if not _TOKEN.match(method) or version not in ("HTTP/1.0", "HTTP/1.1") or _BAD_TARGET.search(target):
            self._reply(400, "malformed request line (method, version, or a target with '\\', '@', '#', "
                             "whitespace or control characters)")
            return
        path = ""
        if method == "CONNECT":
            host, port = _split_hostport(target, 443)
            if not _HOSTNAME.match(host) and not _HOSTNAME.match(f"[{host}]"):
                self._reply(400, "malformed CONNECT target")
                return
        else:
            url = urlsplit(target)
            try:
                url_port = url.port
            except ValueError:
                url_port = -1
            name = url.hostname or ""
            if url.scheme != "http" or not name or url_port == -1 or not (_HOSTNAME.match(name)
                                                                          or _HOSTNAME.match(f"[{name}]")):
                self._reply(400, "only clean absolute http:// URLs and CONNECT are proxied")
                return
            host, port = url.hostname, url_port or 80
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        if not allowed(host, self.server.allow, port, connect=method == "CONNECT"):
            self.server.log(method, host, port, False, REFUSED)
            self._reply(403, f"failatlas: egress to {host}:{port} refused by the sandbox's network policy "
                             "(registries)")
            return
        try:
            address = self._checked_address(host, port)
        except (OSError, ValueError) as exc:
            self.server.log(method, host, port, False, f"{REFUSED}: {exc}")
            self._reply(403, f"failatlas: egress to {host}:{port} refused: {exc}")
            return
        body = b""
        if method != "CONNECT":
            try:
                length = _body_length(lines[1:])
                body = _read_body(client, rest, length)
            except ValueError as exc:
                self._reply(400, str(exc))
                return
        try:
            upstream = self._connect(method, host, port, address)
        except OSError as exc:
            self.server.log(method, host, port, True, f"connect failed: {exc}", connected=False)
            self._reply(502, f"failatlas: cannot reach {host}:{port}: {exc}")
            return
        self.server.log(method, host, port, True, "allowed registry host", connected=True)
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                _relay(client, upstream)
            else:
                upstream.sendall(self._forward_head(method, host, port, path, version, lines[1:], len(body)) + body)
                _drain(upstream, client)

    def _checked_address(self, host: str, port: int) -> str | None:
        """With `refuse_private`: the address to connect to (None when only the upstream proxy can resolve the name);
        ValueError when the name resolves to a non-public address, or cannot be resolved without an upstream."""
        if not self.server.refuse_private:
            return None
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if self.server.upstream is not None:
                return None  # only the host's proxy resolves here: it connects from its own place
            raise ValueError(f"cannot resolve {host}") from exc
        addresses = [info[4][0] for info in infos]
        bad = [a for a in addresses if non_public(a) or host_address(a)]
        if bad or not addresses:
            raise ValueError(f"{host} resolves to a non-public or this host's own address "
                             f"({', '.join(bad[:3]) or 'none'})")
        return addresses[0]

    def _connect(self, method: str, host: str, port: int, address: str | None = None) -> socket.socket:
        up = self.server.upstream
        if up is None:
            return socket.create_connection((address or host, port), timeout=30)
        sock = socket.create_connection((up.hostname, up.port or 80), timeout=30)
        if method != "CONNECT":
            return sock
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n".encode()
                     + self.server.upstream_auth() + b"\r\n")
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk or len(reply) > MAX_HEAD:
                sock.close()
                raise OSError("the upstream proxy closed the tunnel")
            reply += chunk
        status_line = reply.split(b"\r\n", 1)[0]
        if status_line.split()[1:2] != [b"200"]:
            sock.close()
            raise OSError("the upstream proxy refused: " + status_line.decode("latin-1"))
        return sock

    def _forward_head(self, method: str, host: str, port: int, path: str, version: str, headers: list[str],
                      length: int) -> bytes:
        """The request rebuilt from its checked parts: target and Host from the checked host, the client's other
        headers less hop-by-hop, framing and Host ones, the body's length as read."""
        skip = ("proxy-", "connection:", "keep-alive:", "host:", "content-length:", "transfer-encoding:", "te:",
                "upgrade:", "trailer:")
        kept = [h for h in headers if h and not h.lower().startswith(skip)]
        hostport = (f"[{host}]" if ":" in host else host) + (f":{port}" if port != 80 else "")
        target = f"http://{hostport}{path}" if self.server.upstream is not None else path
        head = (f"{method} {target} {version}\r\nHost: {hostport}\r\n" + "".join(h + "\r\n" for h in kept)
                + (f"Content-Length: {length}\r\n" if length or method in ("POST", "PUT", "PATCH") else "")
                + "Connection: close\r\n")
        auth = self.server.upstream_auth() if self.server.upstream is not None else b""
        return head.encode("latin-1") + auth + b"\r\n"

    def _reply(self, code: int, text: str) -> None:
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[code]
        body = (text + "\n").encode()
        with contextlib.suppress(OSError):
            self.request.sendall(f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: "
                                 f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)


def _body_length(headers: list[str]) -> int:
    """The declared body length of a plain-HTTP request. ValueError for a head that could frame its body two ways
    (Transfer-Encoding, conflicting or malformed Content-Length, folded or nameless header lines)."""
    lengths = set()
    for line in headers:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or line[0] in " \t" or not _TOKEN.match(name.upper()
                                                                                               .replace("-", "")):
            raise ValueError(f"malformed header line {line[:80]!r}")
        if name.lower() == "transfer-encoding":
            raise ValueError("Transfer-Encoding is not accepted on plain-HTTP requests (send a Content-Length)")
        if name.lower() == "content-length":
            value = value.strip()
            if not value.isdigit():
                raise ValueError(f"malformed Content-Length {value[:40]!r}")
            lengths.add(int(value))
    if len(lengths) > 1:
        raise ValueError("conflicting Content-Length headers")
    length = lengths.pop() if lengths else 0
    if length > 64 * 1024 * 1024:
        raise ValueError("request body too large")
    return length


def _read_body(client: socket.socket, rest: bytes, length: int) -> bytes:
    """Exactly `length` bytes of body (what came after the head first); bytes beyond it are dropped."""
    body = rest[:length]
    while len(body) < length:
        try:
            chunk = client.recv(min(65536, length - len(body)))
        except OSError as exc:
            raise ValueError(f"request body not received ({exc})") from exc
        if not chunk:
            raise ValueError("request body shorter than its Content-Length")
        body += chunk
    return body


def _drain(upstream: socket.socket, client: socket.socket) -> None:
    """Copy the one response back to the client until the upstream closes (the request said Connection: close)."""
    upstream.settimeout(IDLE_S)
    try:
        while data := upstream.recv(65536):
            client.sendall(data)
    except OSError:
        return


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes or both are idle for IDLE_S."""
    sel = selectors.DefaultSelector()
    for sock, other in ((a, b), (b, a)):
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, other)
    try:
        while True:
            events = sel.select(IDLE_S)
            if not events:
                return
            for key, _ in events:
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                other = key.data
                other.setblocking(True)
                try:
                    other.sendall(data)
                except OSError:
                    return
                finally:
                    other.setblocking(False)
    finally:
        sel.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="FailAtlas egress proxy (allowlist of host names)")
    parser.add_argument("--port", type=int, default=3128)
    parser.add_argument("--allow", default="", help="comma-separated host names, *.domain for subdomains")
    parser.add_argument("--log", required=True)
    parser.add_argument("--upstream", default=None, help="http://[user:pass@]host:port of the host's proxy")
    parser.add_argument("--unix", default=None, help="listen on this unix socket instead of --port")
    parser.add_argument("--refuse-private", action="store_true", help="refuse names resolving to non-public addresses")
    parser.add_argument("--parent", type=int, default=None, help="exit when this process is gone")
    args = parser.parse_args(argv)
    allow = [h.strip().lower() for h in args.allow.split(",") if h.strip()]
    if args.unix:
        server: Proxy = UnixProxy(args.unix, allow, args.log, args.upstream)
        os.chmod(args.unix, 0o666)  # the sandbox's own uid connects; only the sandbox sees the socket's folder
    else:
        server = Proxy(("0.0.0.0", args.port), allow, args.log, args.upstream)
    server.refuse_private = args.refuse_private
    if args.parent:
        threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    with server:
        open(args.log, "a").close()
        print(f"egress proxy on {args.unix or f':{args.port}'}, {len(allow)} allowed host(s)", flush=True)
        server.serve_forever()


def _watch_parent(pid: int) -> None:
    while os.getppid() == pid:
        time.sleep(1)
    os._exit(0)


if __name__ == "__main__":
    main()
