from typer.testing import CliRunner

from failatlas.cli import app
from failatlas.core.errors import InputError
from failatlas.store import Store

runner = CliRunner()


def _invoke(db, *args):
    return runner.invoke(app, ["--db", str(db), "ingest", *args], env={"FAILATLAS_NO_PROGRESS": "1"})


def test_cli_file_import_reimport_and_stats(db_path, fixtures):
    result = _invoke(
        db_path, "file", str(fixtures / "good.jsonl"), str(fixtures / "good.csv"), "--text-column", "text"
    )
    assert isinstance(result.exception, InputError)  # good.csv has no 'text' column: nothing imported
    assert Store(db_path).query("SELECT count(*) FROM insight_sources") == [(0,)]

    result = _invoke(db_path, "file", str(fixtures / "good.jsonl"))
    assert result.exit_code == 0, result.output
    assert "4 occurrence(s) read, 4 new, 3 new insight(s)" in result.stdout
    result = _invoke(db_path, "file", str(fixtures / "good.jsonl"), "--format", "jsonl")
    assert "4 occurrence(s) read, 0 new, 0 new insight(s)" in result.stdout

    result = _invoke(
        db_path,
        "file",
        str(fixtures / "good.csv"),
        "--text-column",
        "summary",
        "--phase-column",
        "stage",
        "--label-column",
        "category",
    )
    assert result.exit_code == 0, result.output
    result = _invoke(db_path, "stats")
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.replace("│", " ").split()) for line in result.stdout.splitlines()]
    assert "implementation jsonl 1 2 1" in lines
    assert "design csv 1 2 2" in lines


def test_cli_runs_with_and_without_llm(db_path):
    result = _invoke(db_path, "runs")
    assert result.exit_code == 0, result.output
    assert "0 occurrence(s) read" in result.stdout
    result = _invoke(db_path, "runs", "--extractor", "llm")
    assert result.exit_code != 0
    assert "extractor" in str(result.exception)


def test_every_ingest_command_has_help():
    for command in ("file", "runs", "stats"):
        result = runner.invoke(app, ["ingest", command, "--help"])
        assert result.exit_code == 0
        assert len(result.stdout.strip()) > 50


def test_an_option_reaches_only_the_chosen_format_and_errors_name_the_flag(db_path, fixtures):
    from failatlas.core.errors import ConfigError

    result = _invoke(db_path, "file", str(fixtures / "good.jsonl"), "--format", "jsonl", "--text", "evidence")
    assert isinstance(result.exception, ConfigError)  # --text is TRAIL's; jsonl takes no such option
    assert "takes no option --text" in str(result.exception) and "text_field" not in str(result.exception)
    result = _invoke(db_path, "file", str(fixtures / "good.jsonl"), "--text", "nope")
    assert isinstance(result.exception, InputError) and "option --text" in str(result.exception)
    assert Store(db_path).query("SELECT count(*) FROM insight_sources") == [(0,)]
    result = _invoke(db_path, "file", str(fixtures / "good.jsonl"), "--format", "jsonl")  # TRAIL's default unused
    assert result.exit_code == 0, result.output


def test_cli_runs_rebuild_is_recorded(db_path):
    import json

    result = _invoke(db_path, "runs", "--rebuild")
    assert result.exit_code == 0, result.output
    assert "0 occurrence(s) read" in result.stdout
    (params,) = Store(db_path).query("SELECT params FROM stage_runs WHERE stage = 'ingest.runs'")[0]
    assert json.loads(params)["rebuild"] is True
