"""Bad input, fuzzed with hypothesis: task importers, insight importers and the taxonomy exporters.

A malformed file gives an InputError naming the file (and the line where there is one) and leaves the store as it
was; a file that still parses is imported. Exports of any names stay well-formed tables with every row kept.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from failatlas.bench_core.tasks import TaskImportParams
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.core.errors import InputError
from failatlas.core.tables import csv_cell
from failatlas.ingest import FileIngestParams, run_file
from failatlas.store import open_store
from failatlas.taxonomy.tables import to_csv, to_latex, to_markdown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
JUNK = st.text(alphabet=st.sampled_from(list('{}[]",:\n\\ 0123456789abcnulltrue\x00é')), max_size=12)


def _mutate(text: str, data) -> str:
    at = data.draw(st.integers(0, len(text)), label="at")
    cut = data.draw(st.integers(0, 40), label="cut")
    return text[:at] + data.draw(JUNK, label="insert") + text[at + cut:]


class Outcomes:
    """Counts what the fuzzing saw, for the table."""

    def __init__(self) -> None:
        self.rejected = self.with_line = self.accepted = 0

    def __str__(self) -> str:
        return (f"{self.rejected} malformed files rejected ({self.with_line} with a line), store unchanged; "
                f"{self.accepted} still-valid files imported")


def _fuzz(tmp_path: Path, data, source: Path, suffix: str, load, snapshot, outcomes: Outcomes, store) -> None:
    text = _mutate(source.read_text(), data)
    path = tmp_path / f"fuzzed{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = snapshot(store)
    try:
        load(store, path)
    except InputError as exc:
        assert str(path.resolve()) in str(exc) or str(path) in str(exc), str(exc)
        assert snapshot(store) == before
        outcomes.rejected += 1
        outcomes.with_line += exc.line is not None or re.search(rf"{re.escape(path.name)}:\d+", str(exc)) is not None
    else:
        outcomes.accepted += 1


def _tasks(store):
    return store.query("SELECT id, spec_hash FROM tasks ORDER BY id")


def _insights(store):
    return (store.query("SELECT id, n_occurrences FROM insights ORDER BY id"),
            store.query("SELECT source_key FROM insight_sources ORDER BY source_key"))


def test_fuzzed_task_files(tmp_path_factory, table):
    outcomes, tmp = Outcomes(), tmp_path_factory.mktemp("fuzz-tasks")
    store = open_store(tmp / "store.duckdb")
    import_tasks(store, TaskImportParams(paths=[FIXTURES / "autoexperiment" / "mlrc_n_k.jsonl"]))
    rows_before = len(_tasks(store))

    @FUZZ
    @given(data=st.data())
    def check(data):
        _fuzz(tmp, data, FIXTURES / "autoexperiment" / "mlrc_n_k.jsonl", ".jsonl",
              lambda s, p: import_tasks(s, TaskImportParams(paths=[p], format="autoexperiment")), _tasks, outcomes,
              store)

    check()
    assert outcomes.rejected > 0
    table.record("fuzz-task-import", str(outcomes), before=rows_before, after=len(_tasks(store)))


def test_fuzzed_insight_and_trace_files(tmp_path_factory, shared_data, table):
    outcomes, tmp = Outcomes(), tmp_path_factory.mktemp("fuzz-insights")
    store = open_store(tmp / "store.duckdb")
    run_file(store, FileIngestParams(paths=[FIXTURES / "ingest" / "good.jsonl"]))
    rows_before = len(_insights(store)[1])
    trail = tmp / "trail_sample.jsonl"  # a few TRAIL trace annotations (read from the shared data, not copied)
    trail.write_text("".join((shared_data / "trail" / "trail_errors_gaia.jsonl").open().readlines()[:8]))
    sources = {
        "jsonl": (FIXTURES / "ingest" / "good.jsonl", {}),
        "csv": (FIXTURES / "ingest" / "good.csv",
                {"text_column": "summary", "phase_column": "stage", "label_column": "category"}),
        "expbench": (FIXTURES / "ingest" / "expbench" / "judge_outputs.jsonl", {}),
        "inspect": (next((FIXTURES / "ingest" / "inspect").glob("*.json")), {}),
        "trail": (trail, {}),
    }
    per_format: dict[str, int] = dict.fromkeys(sources, 0)

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data(), fmt=st.sampled_from(sorted(sources)))
    def check(data, fmt):
        source, options = sources[fmt]
        per_format[fmt] += 1
        _fuzz(tmp, data, source, source.suffix,
              lambda s, p: run_file(s, FileIngestParams(paths=[p], format=fmt, options=options)),
              _insights, outcomes, store)

    check()
    assert outcomes.rejected > 0 and outcomes.with_line > 0
    table.record("fuzz-insight-import", f"{str(outcomes)} (formats: "
                 + ", ".join(f"{k} {v}" for k, v in per_format.items()) + ")",
                 before=rows_before, after=len(_insights(store)[1]))


NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)


def _frame(names: list[tuple[str, str, str]]) -> pl.DataFrame:
    n = len(names)
    return pl.DataFrame({
        "taxonomy_id": ["t"] * n, "phase": [p for p, _, _ in names], "category_id": [f"c{i}" for i in range(n)],
        "category": [c for _, c, _ in names], "failure_type_id": [f"f{i}" for i in range(n)],
        "failure_type": [f for _, _, f in names], "count": list(range(1, n + 1)), "total": [n * n] * n,
        "share": [0.1] * n, "ci_low": [0.05] * n, "ci_high": [0.2] * n,
    })


def test_fuzzed_taxonomy_exports(table):
    seen = {"examples": 0}

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["design", "implementation", "execution"]), NAMES, NAMES),
                    min_size=1, max_size=6))
    def check(names):
        frame = _frame(names)
        md = to_markdown(frame).splitlines()
        assert len(md) == 2 + len(names)
        widths = {len(line.replace("\\|", "").split("|")) for line in md}
        assert len(widths) == 1, md
        latex = to_latex(frame, caption="Fuzzed names")
        assert "\n\n" not in latex  # a blank line ends a LaTeX paragraph inside the tabular
        body = latex.split("\\midrule", 1)[1]
        rows = [line for line in body.splitlines() if line.startswith("\\leftskip=")]  # one per failure type
        assert len(rows) == len(names) and all(line.endswith(r" \\") and line.count(r"\\") == 1 for line in rows)
        assert body.count(r"\\") == len(names) + sum(line.startswith(("\\textbf{", "\\hspace*", "\\multicolumn{"))
                                                    for line in body.splitlines())  # + phase/category heading rows
        parsed = list(csv.DictReader(io.StringIO(to_csv(frame))))
        # every text cell as the CSV rule writes it (`csv_cell`: no control characters, a formula made inert)
        assert [(r["phase"], r["category"], r["failure_type"]) for r in parsed] == [
            (p, csv_cell(c), csv_cell(f)) for p, c, f in names]
        seen["examples"] += 1

    check()
    table.record("fuzz-taxonomy-export", f"{seen['examples']} generated tables: Markdown rows and columns intact, "
                 "LaTeX rows intact, CSV round-trips every name", before=None, after=None)
