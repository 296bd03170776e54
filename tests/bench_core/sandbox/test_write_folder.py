"""`protocol.write_folder` where a sandbox kind has no one-copy folder write (Docker's is in test_docker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.sandbox.protocol import write_folder


def test_write_folder_falls_back_to_a_write_each_where_the_kind_has_no_folder_copy(tmp_path: Path) -> None:
    with create_sandbox("local", SandboxSpec(), workspace=tmp_path) as box:
        assert not hasattr(box, "write_folder")
        write_folder(box, ".made", [("a.py", b"x = 1\n"), ("b", b"")])
        assert box.read_file(".made/a.py") == b"x = 1\n" and box.read_file(".made/b") == b""


def test_a_name_that_is_a_path_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with create_sandbox("local", SandboxSpec(), workspace=tmp_path) as box:
        for bad in ("../x", "a/b", "", ".."):
            with pytest.raises(ValueError):
                write_folder(box, ".made", [("ok", b"1"), (bad, b"2")])
        assert not (Path(box.workdir) / ".made").exists()
