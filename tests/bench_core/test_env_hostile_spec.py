"""A hostile environment spec in a task's repository (`sandbox build-env --venv`): shell metacharacters, pip options
and an over-long line are installed (or fail) inside the bwrap sandbox only, never run on the host; a NUL, a
control character or a line no command line holds is left out with a note instead of crashing the build as the
sandbox's failure (it was `ValueError: embedded null byte`, or SandboxError 'Argument list too long', which reads
as an infrastructure failure and ended a --best-effort build); a spec of thousands of requirements is refused."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox.bwrap_setup import bwrap_binary, bwrap_problem
from failatlas.bench_core.sandbox.envbuild import MAX_REQUIREMENT_CHARS, MAX_REQUIREMENTS, parse_spec
from failatlas.core.errors import InputError


def test_unprintable_and_over_long_requirements_are_left_out_with_a_note(tmp_path: Path) -> None:
    spec_file = tmp_path / "requirements.txt"
    spec_file.write_text("six\x00; rm -rf ~\nnumpy\x1b[2J\n" + "y" * (MAX_REQUIREMENT_CHARS + 1) + "\nsix>=1\n")
    spec = parse_spec(spec_file, "requirements.txt")
    assert spec.requirements == ["six>=1"]
    assert len([n for n in spec.left_out if n.startswith("unreadable requirement")]) == 3
    assert all("\x00" not in n and "\x1b" not in n and len(n) < 200 for n in spec.left_out)


def test_a_pyproject_dependency_cannot_slip_a_line_into_the_requirements_file(tmp_path: Path) -> None:
    spec_file = tmp_path / "pyproject.toml"
    spec_file.write_text('[project]\nname = "x"\ndependencies = ["six\\n-r /etc/shadow", "numpy"]\n')
    spec = parse_spec(spec_file, "pyproject.toml")
    assert spec.requirements == ["numpy"]
    assert any("unreadable requirement" in n for n in spec.left_out)


def test_a_spec_of_thousands_of_requirements_is_refused(tmp_path: Path) -> None:
    spec_file = tmp_path / "requirements.txt"
    spec_file.write_text("".join(f"pkg{i}\n" for i in range(MAX_REQUIREMENTS + 1)))
    with pytest.raises(InputError, match="requirements"):
        parse_spec(spec_file, "requirements.txt")


@pytest.mark.slow
def test_metacharacters_and_pip_options_stay_inside_the_sandbox() -> None:
    from failatlas.bench_core.sandbox.venvs import RECORD, build_venv

    problem = bwrap_problem(bwrap_binary())  # fail, never skip: scripts/setup.sh installs bubblewrap
    assert problem is None, f"bwrap sandboxes cannot run here ({problem}): run scripts/setup.sh"
    folder = Path(tempfile.mkdtemp(prefix="failatlas-hostile-spec-", dir="/tmp"))
    os.chmod(folder, 0o755)
    canary = folder / "host-canary"
    try:
        spec_file = folder / "requirements.txt"
        spec_file.write_text(f"six; touch {canary}1\n$(touch {canary}2)\n`touch {canary}3`\n"
                             f"--index-url=http://127.0.0.1:9/simple\nsix' && touch {canary}4 && echo '\n"
                             + "y" * (MAX_REQUIREMENT_CHARS + 1) + "\nsix\x00x\n")
        spec = parse_spec(spec_file, "requirements.txt")
        built = build_venv("hostile-spec", spec, root=folder / "envs", offline=True, best_effort=True,
                           timeout_s=120, python="/usr/bin/python3")
        assert not list(folder.glob("host-canary*"))  # nothing ran on the host
        assert len(built.failed) == 5 and not built.installed  # each failed inside the sandbox, offline
        record = json.loads((Path(built.tag) / RECORD).read_text())
        assert len([n for n in record["left_out"] if n.startswith("unreadable requirement")]) == 2
    finally:
        shutil.rmtree(folder, ignore_errors=True)
