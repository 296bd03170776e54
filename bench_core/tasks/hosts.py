"""Host names a network policy may allow (`resources.allow_hosts` of a task, `--allow-host`, this host's package
indexes), checked in one place: the task model (tasks may not widen the network) and the sandbox policy use it."""

from __future__ import annotations

import ipaddress
import re

from failatlas.core.errors import ConfigError

_HOST = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_NEVER = ("localhost", "host.docker.internal", "gateway.docker.internal", "metadata.google.internal", "metadata")


def check_host(host: str, *, task: bool = False, field: str = "allowed host") -> str:
    """`host` lowercased when it is a host name, `*.domain` or (user and host settings only) an IP literal, with an
    optional `:port`; ConfigError naming `field` otherwise. Always refused: a wildcard over a top-level domain
    (`*.com`), localhost and the Docker host's or a cloud's metadata names, loopback, link-local, unspecified and
    multicast addresses. With `task` (a task file's `allow_hosts`, content we do not trust) every IP literal is
    refused too: a task names its registries by name."""
    name = host.strip().lower().rstrip(".")
    port = ""
    if name.startswith("["):
        inner, _, rest = name[1:].partition("]")
        name, port = inner, rest[1:] if rest.startswith(":") else rest
    elif name.count(":") == 1:
        name, _, port = name.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ConfigError(f"{field} {host!r} is not a host name (or host:port with a port number)",
                          hint="give names like pypi.org, *.example.org or mirror.example.org:8080")
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        ip = None
    if ip is not None:
        if task:
            raise ConfigError(f"{field} {host!r}: IP addresses are not accepted in a task's allow_hosts",
                              hint="name the registry's host (pypi.org, *.example.org)")
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast or ip.is_reserved:
            raise ConfigError(f"{field} {host!r}: a loopback, link-local or reserved address is never allowed")
        return f"[{name}]:{port}" if port and ip.version == 6 else (f"{name}:{port}" if port else name)
    if not _HOST.match(name) or name.rsplit(".", 1)[-1].isdigit():
        raise ConfigError(f"{field} {host!r} is not a host name", hint="give names like pypi.org or *.example.org")
    bare = name[2:] if name.startswith("*.") else name
    if name.startswith("*.") and "." not in bare:
        raise ConfigError(f"{field} {host!r}: a wildcard over a whole top-level domain is never allowed",
                          hint="give the registry's domain, like *.example.org")
    if bare in _NEVER or bare.endswith((".localhost", ".internal", ".local")) or bare == "internal":
        raise ConfigError(f"{field} {host!r}: local and Docker-host names are never allowed")
    return f"{name}:{port}" if port else name
