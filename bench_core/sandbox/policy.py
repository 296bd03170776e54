"""Network policies of sandboxes, and what the host tells us about its package indexes, proxy and CA bundle.

- `none` (default): no network at all.
- `registries`: package indexes only. The Python and Debian indexes this host is configured with (pip's
  index-url and extra-index-url from its environment and config files, apt's sources), plus the hosts the user
  lists; everything else is refused by an egress proxy (`egress.py`, `egress_proxy.py`).
- `full`: the outside world, never the Docker host (`network.py`).

When the policy allows network, the host's CA bundle (the one pip/requests here use, or `--ca-bundle`) is given to
the sandbox so `pip install` works behind an HTTPS-intercepting proxy. The run records which bundle (path and
sha256), never its contents.
"""

from __future__ import annotations

import configparser
import glob
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from failatlas.bench_core.tasks.hosts import check_host
from failatlas.core.errors import ConfigError

NetworkPolicy = Literal["none", "registries", "full"]
POLICIES: tuple[str, ...] = ("none", "registries", "full")
PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org")
CA_PATH = "/etc/failatlas/ca-bundle.pem"
CA_ENV_VARS = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
               "NODE_EXTRA_CA_CERTS")
_SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def as_policy(value: Any) -> str:
    """A policy name from a policy or the older boolean (`network: true` is `full`). ValueError otherwise."""
    if value is None or value is False:
        return "none"
    if value is True:
        return "full"
    if isinstance(value, str) and value.strip().lower() in POLICIES:
        return value.strip().lower()
    raise ValueError(f"network must be one of {', '.join(POLICIES)} (or true/false), not {value!r}")


class CaBundle(BaseModel):
    """The CA bundle given to a sandbox: where it is on the host and its sha256 (never its contents)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str


def _pip_config_files() -> list[Path]:
    files = [Path("/etc/pip.conf"), *(Path(d) / "pip/pip.conf" for d in
                                      os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":"))]
    home = Path.home()
    files += [home / ".pip/pip.conf", home / ".config/pip/pip.conf"]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


_PIP_KEYS = ("index-url", "extra-index-url", "trusted-host", "cert", "proxy")


def pip_settings(files: Iterable[Path] | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """pip's settings that matter here (index-url, extra-index-url, trusted-host, cert, proxy), as pip reads
    them: config files in order (later wins; [global] then [install]), then PIP_* environment variables."""
    env = os.environ if env is None else env
    found: dict[str, str] = {}
    for path in files if files is not None else _pip_config_files():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                found.update({k: v for k, v in parser.items(section) if k in _PIP_KEYS})
    for key in _PIP_KEYS:
        value = env.get("PIP_" + key.upper().replace("-", "_"))
        if value:
            found[key] = value
    return found


def _hosts_of(urls: Iterable[str]) -> list[str]:
    """The hosts of `urls`, with `:port` when the URL names a port other than its scheme's default."""
    out = []
    for url in urls:
        parts = urlsplit(url.strip())
        host = parts.hostname
        try:
            port = parts.port
        except ValueError:
            continue
        if host:
            default = {"http": 80, "https": 443}.get(parts.scheme)
            out.append(host.lower() + (f":{port}" if port and port != default else ""))
    return out


def _usable(hosts: Iterable[str]) -> set[str]:
    """This host's own index hosts that a sandbox could reach (a localhost devpi, say, never can: dropped)."""
    out = set()
    for host in hosts:
        try:
            out.add(check_host(host))
        except ConfigError:
            continue
    return out


def pip_env(pip: dict[str, str] | None = None) -> dict[str, str]:
    """PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and PIP_TRUSTED_HOST for a sandbox with network, from this host's pip
    settings, so that its pip goes to the same (private) indexes the `registries` policy allows. Credentials in
    an index URL are removed: a sandbox never sees the host's secrets."""
    pip = pip_settings() if pip is None else pip
    env = {}
    for key in ("index-url", "extra-index-url", "trusted-host"):
        value = pip.get(key, "").split()
        if key != "trusted-host":
            value = [_without_credentials(url) for url in value]
        if value:
            env["PIP_" + key.upper().replace("-", "_")] = " ".join(value)
    return env


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def apt_source_urls(files: Sequence[str] | None = None) -> list[str]:
    """Every archive URL of this host's apt sources (one-line and deb822 formats)."""
    files = files if files is not None else [
        "/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list")),
        *sorted(glob.glob("/etc/apt/sources.list.d/*.sources")),
    ]
    urls: list[str] = []
    for name in files:
        try:
            text = Path(name).read_text(errors="replace")
        except OSError:
            continue
        urls += re.findall(r"^deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.MULTILINE)
        for line in re.findall(r"^URIs:[ \t]*(.+)$", text, re.MULTILINE):
            urls += line.split()
    return urls


def registry_hosts(extra: Iterable[str] = (), *, pip: dict[str, str] | None = None,
                   apt_files: Sequence[str] | None = None) -> list[str]:
    """The hosts the `registries` policy allows: pip's indexes (PyPI when none is configured), apt's archives,
    and `extra` (the user's; ConfigError for one that `check_host` refuses). This host's own index hosts that a
    sandbox can never reach (localhost) are dropped. Sorted, without duplicates."""
    pip = pip_settings() if pip is None else pip
    indexes = [pip["index-url"]] if pip.get("index-url") else []
    hosts = _usable(_hosts_of(indexes + pip.get("extra-index-url", "").split()))
    if not indexes or "pypi.org" in hosts:
        hosts |= set(PYPI_HOSTS)
    hosts |= _usable(_hosts_of(apt_source_urls(apt_files)))
    hosts |= {check_host(h) for h in extra}
    return sorted(hosts)


def upstream_proxy(env: dict[str, str] | None = None, pip: dict[str, str] | None = None) -> str | None:
    """The proxy this host's own HTTPS goes through ($HTTPS_PROXY, $HTTP_PROXY, either in lower case, or pip's
    `proxy`), as http://host:port; None when there is none (direct, or a transparent proxy)."""
    env = os.environ if env is None else env
    for key in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        if env.get(key):
            return env[key] if "://" in env[key] else f"http://{env[key]}"
    proxy = (pip_settings() if pip is None else pip).get("proxy")
    return (proxy if "://" in proxy else f"http://{proxy}") if proxy else None


def default_ca_bundle(env: dict[str, str] | None = None, pip: dict[str, str] | None = None) -> str | None:
    """The CA bundle pip and requests on this host use: $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, $PIP_CERT, pip's
    `cert`, certifi's, the system bundle; the first that is a file. None when none is."""
    env = os.environ if env is None else env
    candidates = [env.get("REQUESTS_CA_BUNDLE"), env.get("SSL_CERT_FILE"), env.get("PIP_CERT"),
                  (pip_settings() if pip is None else pip).get("cert")]
    try:
        import certifi

        candidates.append(certifi.where())
    except ImportError:
        pass
    candidates += list(_SYSTEM_BUNDLES)
    for path in candidates:
        if path and Path(path).is_file():
            return str(Path(path).resolve())
    return None


def ca_bundle(path: str | Path | None) -> CaBundle | None:
    """The bundle at `path` with its sha256 (None for None). ConfigError when it is not a readable PEM file."""
    if path is None:
        return None
    p = Path(path).expanduser().resolve()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--ca-bundle {path}: cannot read it ({exc.strerror or exc})") from exc
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ConfigError(f"--ca-bundle {path}: not a PEM certificate bundle (no BEGIN CERTIFICATE line)")
    return CaBundle(path=str(p), sha256=hashlib.sha256(data).hexdigest())


def ca_env(bundle: CaBundle | str | None) -> dict[str, str]:
    """The variables that point pip, requests, curl, git and OpenSSL in the sandbox at the bundle."""
    return {name: CA_PATH for name in CA_ENV_VARS} if bundle is not None else {}
