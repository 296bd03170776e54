"""`failatlas --help` and `failatlas version` load only what they use: no store (DuckDB), no Polars, no stage. The
groups are still all listed with their help, and each loads when it runs. (How long start-up takes is measured in
benchmarks/cli_startup.py, never here.)"""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

HEAVY = ("duckdb", "polars", "numpy", "pydantic_settings", "failatlas.store", "failatlas.core.store",
         "failatlas.bench_core", "failatlas.ingest", "failatlas.embed", "failatlas.cluster", "failatlas.taxonomy")
PROBE = """
import atexit, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED", sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr))
sys.argv = ["failatlas", *{argv!r}]
from failatlas.cli import main
main()
"""


def _loaded(*argv: str) -> tuple[str, list[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=list(argv))], capture_output=True,
                          text=True, timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("LOADED"))
    return proc.stdout, eval(line.removeprefix("LOADED "))  # noqa: S307 - our own probe's printed list


def test_help_and_version_load_no_store_and_no_stage():
    from failatlas.cli import SUBCOMMANDS
    from failatlas.core.version import __version__

    out, loaded = _loaded("--help")
    assert loaded == []
    for name, _module, help_ in SUBCOMMANDS:
        assert name in out and help_ in out
    out, loaded = _loaded("version")
    assert loaded == [] and out.strip() == __version__


def test_a_group_loads_when_it_runs(tmp_path):
    out, loaded = _loaded("--db", str(tmp_path / "s.duckdb"), "tasks", "import-mini")  # creates and migrates
    assert "failatlas.bench_core.cli.tasks" in loaded and "duckdb" in loaded and "failatlas.store" in loaded
    assert out.startswith("failatlas-mini: 1 file(s), 6 task(s) (6 new")
    from failatlas.cli import app

    res = CliRunner().invoke(app, ["tasks", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "Import, list and show benchmark tasks" in res.output and "validate" in res.output
