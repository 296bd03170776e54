"""Repository URLs: one normal form to compare them by, the URL git clones, and the cache folder's name.

`normalise_url` gives every spelling of one repository the same text: `github.com/apple/ml-calibration`,
`https://github.com/apple/ml-calibration.git`, `HTTPS://GitHub.com/apple/ml-calibration/`, `http://...`,
`ssh://git@github.com/apple/ml-calibration` and `git@github.com:apple/ml-calibration.git` are all
`https://github.com/apple/ml-calibration`: the scheme and host lower-case, user and default ports dropped, no
`.git`, no trailing slash. The path keeps its case (GitHub ignores it, other hosts need not). A local repository
(`file://` URL or a path) is `file://` and its absolute path. Anything else (`ext::`, an option-like `-u...`,
spaces, a query) is refused with an InputError: such a text must never reach `git clone`.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from urllib.parse import urlsplit

from failatlas.core.errors import InputError

NETWORK_SCHEMES = ("https", "http", "git", "ssh", "git+ssh", "ssh+git")
_SCP_LIKE = re.compile(r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*|/.+)")
_HOST_PATH = re.compile(r"(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|localhost)(?::(?P<port>\d+))?/(?P<path>.+)")
_HOST = re.compile(r"[a-z0-9.-]+")
_DEFAULT_PORTS = {"https": "443", "http": "80"}
MAX_SLUG = 80


def _refuse(url: str, why: str) -> InputError:
    return InputError(f"{url[:200]!r} is not a repository URL: {why}", field="url",
                      hint="use https://host/owner/name, git@host:owner/name, a file:// URL or a local path")


def _clean_path(path: str, url: str) -> str:
    """The path without repeated or trailing slashes, `.git`, `.` parts; '..' refused."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        raise _refuse(url, "it names no repository on the host")
    if ".." in parts:
        raise _refuse(url, "'..' is not allowed")
    parts[-1] = parts[-1].removesuffix(".git")
    if not parts[-1]:
        raise _refuse(url, "it names no repository on the host")
    return "/".join(parts)


def is_local(url: str) -> bool:
    """Whether `url` names a repository on this machine (a `file://` URL or a path)."""
    text = url.strip()
    return text.lower().startswith("file://") or text.startswith(("/", "./", "../", "~")) or text in (".", "..")


def local_path(url: str) -> str:
    """The absolute path a local repository URL (`file:///...`, `~/x`, `./x`, `/x`) names."""
    text = url.strip()
    path = text[len("file://"):] if text.lower().startswith("file://") else os.path.expanduser(text)
    if text.lower().startswith("file://") and not path.startswith("/"):
        raise _refuse(url, "a file:// URL needs an absolute path (file:///...)")
    return posixpath.normpath(os.path.abspath(path))


def _local(url: str) -> str:
    return "file:///" + _clean_path(local_path(url), url)


def normalise_url(url: str) -> str:
    """The normal form of a repository URL (see the module's docstring); InputError (field `url`) when `url` is
    not one."""
    if not isinstance(url, str) or not url.strip():
        raise InputError(f"must be a repository URL, not {url!r}", field="url")
    text = url.strip()
    if not text.isprintable() or any(c.isspace() for c in text):
        raise _refuse(url, "it holds spaces or control characters")
    if text.startswith("-"):
        raise _refuse(url, "it would be read as an option")
    if "::" in text:
        raise _refuse(url, "git would read '<transport>::' as a remote helper")
    if is_local(text):
        return _local(text)
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in NETWORK_SCHEMES:
            raise _refuse(url, f"the scheme {scheme!r} is not one git may fetch from here")
        if parts.query or parts.fragment:
            raise _refuse(url, "a query or fragment names no repository")
        try:
            port = parts.port
        except ValueError as exc:
            raise _refuse(url, "its port is not a number") from exc
        host, keep_port = (parts.hostname or ""), port is not None and str(port) != _DEFAULT_PORTS.get(scheme)
        if scheme in ("https", "http") and keep_port:
            host = f"{host}:{port}"
        return _network(host, parts.path, url)
    scp = _SCP_LIKE.fullmatch(text)
    if scp and "/" not in scp.group("host"):
        return _network(scp.group("host"), scp.group("path"), url)
    bare = _HOST_PATH.fullmatch(text)
    if bare:
        host = bare.group("host") + (f":{bare.group('port')}" if bare.group("port") else "")
        return _network(host, bare.group("path"), url)
    raise _refuse(url, "neither host/owner/name, a URL with a scheme, nor a path")


def _network(host: str, path: str, url: str) -> str:
    host = host.lower()
    if not host or not _HOST.fullmatch(host.split(":")[0]):
        raise _refuse(url, f"{host!r} is not a host name")
    return f"https://{host}/{_clean_path(path, url)}"


def clone_url(url: str, *, allow_local: bool = False) -> str:
    """The URL to hand `git clone` for `url` as a task or user gave it: `host/owner/name` gets `https://`, other
    network forms are kept as given (their scheme and user matter to git), a local one becomes its `file://` URL.
    InputError when `url` is not a repository URL, or is local and `allow_local` is off (a downloaded task file
    may not make FailAtlas copy a repository of this machine into the cache)."""
    normal = normalise_url(url)
    if normal.startswith("file://"):
        if not allow_local:
            raise InputError(f"{url!r} is a repository on this machine", field="url",
                             hint="add it with `failatlas repos add PATH`, or pass --allow-local")
        return "file://" + local_path(url)
    text = url.strip()
    if "://" in text or _SCP_LIKE.fullmatch(text):
        return text
    return normal


def slug(url: str | None, fallback: str) -> str:
    """A folder name for a repository: its normal URL without the scheme (`github.com_apple_ml-calibration`), or
    `local_<fallback>` for one without a URL; long names keep a hash of the whole."""
    base = normalise_url(url).split("://", 1)[1] if url else f"local_{fallback}"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._-") or "repository"
    if len(name) > MAX_SLUG:
        name = f"{name[:MAX_SLUG - 13]}_{hashlib.sha256(base.encode()).hexdigest()[:12]}"
    return name


_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def without_credentials(text: str) -> str:
    """`text` with the `user:password@` of every URL in it replaced by `***@`: what is stored or printed (the
    repository URL given to git keeps them)."""
    return _CREDENTIALS.sub("***@", text)
