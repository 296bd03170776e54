"""Names of data inputs (datasets, weights) and where a sandbox shows them: `--data NAME=PATH` and a task file's
`data:` mapping mount PATH read-only at `/data/NAME`, and every command sees `$FAILATLAS_DATA_NAME` (the local
sandbox, which mounts nothing, points it at the host path). Below both the task model and the sandbox, which
check names here (docs/sandbox.md, "Data and weights")."""

from __future__ import annotations

import re

from failatlas.core.errors import ConfigError

DATA_ROOT = "/data"
DATA_VAR_PREFIX = "FAILATLAS_DATA_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def check_name(name: str, *, field: str = "--data") -> str:
    """`name` when it is an identifier of at most 64 ASCII letters, digits and underscores (it names a folder
    under /data and an environment variable); ConfigError naming `field` otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{field}: data name {name!r} is not an identifier",
                          hint="use letters, digits and _ (not first a digit), e.g. --data movielens=/srv/ml-1m")
    return name


def data_target(name: str) -> str:
    """The sandbox path the data input `name` is mounted at."""
    return f"{DATA_ROOT}/{name}"


def data_var(name: str) -> str:
    """The environment variable that holds where the data input `name` is, as commands see it."""
    return DATA_VAR_PREFIX + name


def is_data_link(target: str) -> bool:
    """Whether a link's `target` points into a data input's mount (`/data/NAME[/...]`, normalised, no `..`): the
    one kind of absolute link a repository keeps. Inside Docker and bwrap sandboxes /data/NAME is only ever the
    read-only mount of data the user gave (`--data NAME=PATH`), so such a link reaches nothing else; the harness
    never follows links on the host."""
    import posixpath

    if not target.startswith(DATA_ROOT + "/") or posixpath.normpath(target) != target:
        return False
    parts = target.split("/")[2:]
    return bool(parts) and _NAME.fullmatch(parts[0]) is not None and ".." not in parts
