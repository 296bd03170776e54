"""`failatlas sandbox ...` through the real root CLI."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from failatlas.cli import app

pytestmark = pytest.mark.docker


def test_every_command_has_help() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["sandbox", "--help"]).output
    for name in ("build-image", "build-env", "cleanup", "list", "gpus"):
        assert name in out
        sub = runner.invoke(app, ["sandbox", name, "--help"])
        assert sub.exit_code == 0 and len(sub.output) > 100


def test_build_image_keeps_an_existing_tag(sandbox_image: str) -> None:
    result = CliRunner().invoke(app, ["sandbox", "build-image", "--tag", sandbox_image],
                                env={"FAILATLAS_NO_PROGRESS": "1"})
    assert result.exit_code == 0, result.output
    assert "kept existing" in result.output


def test_cleanup_and_list_run() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["sandbox", "cleanup", "--run-id", "no-such-run"]).output
    assert out.startswith("removed 0 orphaned sandbox(es) (bwrap: 0, docker: 0, local: 0)"), out
    assert runner.invoke(app, ["sandbox", "list"]).exit_code == 0
