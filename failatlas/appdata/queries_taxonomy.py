"""Read-only queries behind the Taxonomy and Compare pages: the stored snapshots, prevalence (whole, or of one agent,
model, benchmark or paper), two groups side by side, the failure types, and the files the exports write.
Conventions as in `queries_store`."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Literal

import polars as pl

from failatlas.appdata.queries_store import read_frame
from failatlas.bench_core.agent_order import ordered_agents
from failatlas.core.store import Store

Dimension = Literal["agent", "model", "benchmark", "paper"]
DIMENSIONS: tuple[str, ...] = ("agent", "model", "benchmark", "paper")


# -- taxonomy ---------------------------------------------------------------------------------------------------
def taxonomies(store: Store) -> pl.DataFrame:
    """Stored taxonomy snapshots, newest first (`taxonomy.list_taxonomies`)."""
    from failatlas.taxonomy import list_taxonomies

    return list_taxonomies(store)


def filter_options(store: Store) -> dict[str, list[str]]:
    """Distinct agents, models, benchmarks and papers that insights name."""
    out: dict[str, list[str]] = {}
    with store.read() as conn:
        for dim, column in (("agent", "agent"), ("model", "model"), ("benchmark", "benchmark"),
                            ("paper", "paper_id")):
            rows = conn.execute(
                f"SELECT DISTINCT {column} FROM insight_sources WHERE {column} IS NOT NULL"  # noqa: S608
                f" AND {column} <> '' ORDER BY 1").fetchall()
            out[dim] = ordered_agents(r[0] for r in rows) if dim == "agent" else [r[0] for r in rows]
    return out


_PAPER_COUNTS_SQL = """
SELECT i.phase, ift.failure_type_id, count(*) AS count
FROM insight_failure_types ift
JOIN insights i ON i.id = ift.insight_id
JOIN insight_sources s ON s.insight_id = ift.insight_id
WHERE ift.taxonomy_id = ? AND s.paper_id = ?
GROUP BY ALL
"""


def prevalence_frame(store: Store, taxonomy_id: str, *, unit: str = "insights", dimension: str | None = None,
                     value: str | None = None) -> pl.DataFrame:
    """Prevalence rows (`taxonomy.prevalence`) of the whole taxonomy, or of one agent, model or benchmark (its
    group of `prevalence(by=...)`, so the numbers equal the exports'). For one paper, which `prevalence` does not
    break down, the rows carry counts and shares of insight occurrences without intervals (ci columns null)."""
    from failatlas.taxonomy import prevalence

    if dimension is None or value is None:
        return prevalence(store, taxonomy_id, unit=unit)  # type: ignore[arg-type]
    if dimension in ("agent", "model", "benchmark"):
        frame = prevalence(store, taxonomy_id, unit=unit, by=dimension)  # type: ignore[arg-type]
        return frame.filter(pl.col("group") == value)
    if dimension != "paper":
        raise ValueError(f"unknown filter dimension {dimension!r}")
    if unit != "insights":
        raise ValueError("a paper filter is available for the share of insights only")
    base = prevalence(store, taxonomy_id, unit="insights").select(
        "taxonomy_id", "unit", "phase", "category_id", "category", "failure_type_id", "failure_type")
    counts = read_frame(store, _PAPER_COUNTS_SQL, [taxonomy_id, value])
    if counts.height == 0:
        return base.head(0).with_columns(
            pl.lit(value).alias("group"), pl.lit(0, pl.Int64).alias("count"), pl.lit(0, pl.Int64).alias("total"),
            pl.lit(None, pl.Float64).alias("share"), pl.lit(None, pl.Float64).alias("ci_low"),
            pl.lit(None, pl.Float64).alias("ci_high"))
    counts = counts.with_columns(pl.col("count").cast(pl.Int64),
                                 pl.col("count").sum().over("phase").cast(pl.Int64).alias("total"))
    return base.join(counts, on=["phase", "failure_type_id"], how="inner").with_columns(
        pl.lit(value).alias("group"), (pl.col("count") / pl.col("total")).alias("share"),
        pl.lit(None, pl.Float64).alias("ci_low"), pl.lit(None, pl.Float64).alias("ci_high"),
    ).select("taxonomy_id", "unit", "group", "phase", "category_id", "category", "failure_type_id",
             "failure_type", "count", "total", "share", "ci_low", "ci_high")


def compare_options(store: Store) -> dict[str, list[str]]:
    """What Compare can put side by side: every agent, model and benchmark that insights name or that ran (so the
    reference agent `gold`, whose runs leave no failure insight, is offered too)."""
    out: dict[str, list[str]] = {}
    with store.read() as conn:
        present = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        for dim in ("agent", "model", "benchmark"):
            parts = [f"SELECT {dim} AS v FROM insight_sources"]  # noqa: S608 - dim is one of three names
            if "runs" in present:
                parts.append(f"SELECT {dim} AS v FROM runs")  # noqa: S608
            rows = conn.execute(f"SELECT DISTINCT v FROM ({' UNION ALL '.join(parts)})"  # noqa: S608
                                " WHERE v IS NOT NULL AND v <> '' ORDER BY 1").fetchall()
            out[dim] = ordered_agents(r[0] for r in rows) if dim == "agent" else [r[0] for r in rows]
    return out


def compare_frame(store: Store, taxonomy_id: str, *, by: str, left: str, right: str,
                  unit: str = "insights") -> pl.DataFrame:
    """Two agents (or models, benchmarks) side by side on the same taxonomy: one row per (phase, failure type) that
    either side shows, with each side's count, total, share and interval (`prevalence(by=...)`, the exports'
    numbers; a side without the type counts 0 of its total, with Wilson's interval of 0 of that total) and the
    difference of shares with Newcombe's hybrid score interval (`taxonomy.prevalence.share_difference`). Rows
    are keyed by the failure type's id, never its name, so a type is one row."""
    import numpy as np

    from failatlas.core.intervals import wilson
    from failatlas.taxonomy import prevalence
    from failatlas.taxonomy.model import phase_rank
    from failatlas.taxonomy.prevalence import share_difference, unit_totals

    frame = prevalence(store, taxonomy_id, unit=unit, by=by)  # type: ignore[arg-type]
    runs_totals = unit_totals(store, taxonomy_id, unit, by)  # type: ignore[arg-type]
    names = frame.select("phase", "failure_type_id", "failure_type", "category").unique(
        ["phase", "failure_type_id"], keep="first", maintain_order=True)
    rows: list[dict[str, Any]] = []
    sides = {name: frame.filter(pl.col("group") == group) for name, group in (("left", left), ("right", right))}
    found = {name: {(r["phase"], r["failure_type_id"]): r for r in part.iter_rows(named=True)}
             for name, part in sides.items()}
    phase_totals = {name: dict(part.group_by("phase").agg(pl.col("count").sum()).iter_rows())
                    for name, part in sides.items()}
    for t in names.iter_rows(named=True):
        key = (t["phase"], t["failure_type_id"])
        if key not in found["left"] and key not in found["right"]:
            continue
        row: dict[str, Any] = dict(t)
        for name, group in (("left", left), ("right", right)):
            hit = found[name].get(key)
            total = (runs_totals.get(group, 0) if unit != "insights" else phase_totals[name].get(t["phase"], 0))
            if hit is not None:
                values = {c: hit[c] for c in ("count", "total", "share", "ci_low", "ci_high")}
            else:
                low, high = (float(v) for v in wilson(0, total)) if total else (np.nan, np.nan)
                values = {"count": 0, "total": total, "share": 0.0 if total else None,
                          "ci_low": None if total == 0 else low, "ci_high": None if total == 0 else high}
            row |= {f"{name}_{c}": v for c, v in values.items()}
        d, low, high = share_difference(row["left_count"], row["left_total"], row["right_count"], row["right_total"])
        row |= {"difference": None if d != d else d, "difference_low": None if low != low else low,
                "difference_high": None if high != high else high}
        rows.append(row)
    schema = {"phase": pl.Utf8, "failure_type_id": pl.Utf8, "failure_type": pl.Utf8, "category": pl.Utf8,
              **{f"{n}_{c}": (pl.Int64 if c in ("count", "total") else pl.Float64)
                 for n in ("left", "right") for c in ("count", "total", "share", "ci_low", "ci_high")},
              "difference": pl.Float64, "difference_low": pl.Float64, "difference_high": pl.Float64}
    out = pl.DataFrame(rows, schema=schema)
    return out.with_columns(
        pl.col("phase").map_elements(phase_rank, return_dtype=pl.Int64).alias("_rank"),
    ).sort(["_rank", "phase", "difference", "failure_type_id"], descending=[False, False, True, False],
           nulls_last=True).drop("_rank")


def compare_totals(store: Store, taxonomy_id: str, *, by: str, values: tuple[str, ...],
                   unit: str = "insights") -> dict[str, int]:
    """Each value's denominator in the whole taxonomy: its insight occurrences (unit `insights`) or its runs
    (tasks) as the share of runs counts them; 0 for a value with none."""
    from failatlas.taxonomy import prevalence
    from failatlas.taxonomy.prevalence import unit_totals

    if unit != "insights":
        totals = unit_totals(store, taxonomy_id, unit, by)  # type: ignore[arg-type]
        return {v: int(totals.get(v, 0)) for v in values}
    frame = prevalence(store, taxonomy_id, by=by)  # type: ignore[arg-type]
    sums = dict(frame.group_by("group").agg(pl.col("count").sum()).iter_rows())
    return {v: int(sums.get(v, 0)) for v in values}


def taxonomy_types(store: Store, taxonomy_id: str) -> pl.DataFrame:
    """The snapshot's failure types with their category, definition, keywords and objects (what a type by cause
    failed on, most frequent first: `taxonomy.facets.objects_of`; '' where its insights name none)."""
    from failatlas.taxonomy.facets import objects_of, objects_text

    frame = read_frame(store, """
        SELECT t.id AS failure_type_id, t.phase, t.name AS failure_type, t.category_id, c.name AS category,
               t.definition, t.keywords, t.n_insights
        FROM failure_types t LEFT JOIN failure_categories c ON c.taxonomy_id = t.taxonomy_id AND c.id = t.category_id
        WHERE t.taxonomy_id = ? ORDER BY t.phase, t.id""", [taxonomy_id])
    objects = {t: objects_text(o) for t, o in objects_of(store, taxonomy_id).items()}
    return frame.with_columns(pl.Series("objects", [objects.get(t, "") for t in frame["failure_type_id"].to_list()],
                                        dtype=pl.Utf8))


def export_files(store: Store, taxonomy_id: str) -> dict[str, bytes]:
    """The files `failatlas taxonomy export` writes as tables (prevalence.tex/.md/.csv, failure_types.md), made
    by `taxonomy.export_taxonomy` itself, so the app's downloads are those exports byte for byte."""
    from failatlas.taxonomy import export_taxonomy

    with tempfile.TemporaryDirectory(prefix="failatlas-app-export-") as tmp:
        result = export_taxonomy(store, taxonomy_id, tmp, formats=("tex", "md", "csv"))
        return {Path(p).name: Path(p).read_bytes() for p in result.written}


def drilldown_files(store: Store, taxonomy_id: str, failure_type_id: str) -> dict[str, bytes]:
    """A failure type's drill-down files (Markdown, CSV, JSON), made by `taxonomy.drilldown.drilldown_files`, so the
    page's downloads are what `failatlas taxonomy export --type` writes, byte for byte."""
    from failatlas.taxonomy.drilldown import drilldown_files as files

    return files(store, failure_type_id, taxonomy_id)


def view_files(frame: pl.DataFrame, view_name: str, unit: str = "insights") -> dict[str, bytes]:
    """The view on screen (the prevalence rows shown, filtered) as the paper exports render it: a LaTeX table
    float, Markdown, CSV, and the prevalence figure as PNG and PDF, named `view-<unit>....`."""
    from failatlas.taxonomy.figures import prevalence_by_phase
    from failatlas.taxonomy.tables import TABLE_FORMATS, to_latex

    stem = "view-" + re.sub(r"[^A-Za-z0-9]+", "-", view_name).strip("-").lower()
    caption = (f"Failure types per phase ({view_name}): n, share of the phase's {unit} with a 95% Wilson interval.")
    out: dict[str, bytes] = {}
    for fmt in TABLE_FORMATS.names():
        if fmt == "tex":
            text = to_latex(frame, caption=caption, label=f"tab:failatlas-{stem}", unit=unit,
                            comment=f"FailAtlas explorer view: {view_name}.")
        else:
            text = TABLE_FORMATS.create(fmt).render(frame, title=caption, comment="")
        out[f"{stem}.{fmt}"] = text.encode()
    with tempfile.TemporaryDirectory(prefix="failatlas-app-view-") as tmp:
        for path in prevalence_by_phase(frame.filter(pl.col("share").is_not_null()), Path(tmp) / stem,
                                        ("png", "pdf"), unit=unit):
            out[path.name] = path.read_bytes()
    return out
