"""Exporting a taxonomy for a paper: the prevalence table as LaTeX, Markdown and CSV, a types appendix, and
figures as PNG and PDF. Every number comes from `prevalence` (through `prevalence_table`), so the exports
agree
with each other and with the app."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from failatlas.core.errors import ConfigError
from failatlas.core.store import Store
from failatlas.taxonomy.assign import resolve_taxonomy
from failatlas.taxonomy.facets import with_objects
from failatlas.taxonomy.figures import agent_heatmap, funnel_figure, prevalence_by_phase
from failatlas.taxonomy.funnel import funnel
from failatlas.taxonomy.prevalence import UNKNOWN_GROUP, prevalence, prevalence_table
from failatlas.taxonomy.read import load_taxonomy, types_markdown
from failatlas.taxonomy.tables import TABLE_FORMATS, has_runs

FIGURE_FORMATS = ("png", "pdf")


def table_caption(version: int | str, runs: bool, view: str | None = None) -> str:
    """The prevalence table's caption, naming the unit of every number and the interval rule."""
    what = f"FailAtlas taxonomy v{version}" + (f", {view}" if view else "")
    return (
        f"Failure types per phase ({what}). n: insight occurrences of the type (one per statement of a failure in "
        "a run or trace); share: of the phase's occurrences, with a 95% Wilson interval (none where a phase has a "
        "single type, which holds 100% by construction)"
        + ("; runs affected: k/n, the runs with at least one such occurrence of all the runs counted." if runs
           else ".")
    )


def export_formats() -> tuple[str, ...]:
    """Every format `export_taxonomy` writes: the registered table formats, then the figures' file types."""
    return (*TABLE_FORMATS.names(), *FIGURE_FORMATS)


class ExportResult(BaseModel):
    """Files written and, for each file not written, why."""

    taxonomy_id: str
    out_dir: str
    written: list[str]
    skipped: dict[str, str]


def export_taxonomy(
    store: Store,
    taxonomy_id: str | None = None,
    out_dir: str | Path = "taxonomy-export",
    *,
    formats: Sequence[str] | None = None,
) -> ExportResult:
    """Write prevalence.{tex,md,csv}, failure_types.md, and prevalence_by_phase / agent_heatmap / funnel
    figures
    (.png, .pdf) for a taxonomy (default: the current one) into `out_dir`.

    The funnel is skipped, with the reason in `skipped`, when the store holds no runs (e.g. a taxonomy of
    imported traces), and the agent heatmap when fewer than two agents are named (one '(unknown)' row):
    a meaningless figure in a paper folder would mislead. Raises ConfigError for an unknown
    format and NotFoundError for an unknown taxonomy.
    """
    known = export_formats()
    formats = known if formats is None else tuple(formats)
    unknown = set(formats) - set(known)
    if unknown:
        raise ConfigError(
            f"unknown export format(s): {sorted(unknown)}", hint=f"choose from {', '.join(known)}"
        )
    taxonomy_id = resolve_taxonomy(store, taxonomy_id)
    taxonomy = load_taxonomy(store, taxonomy_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = with_objects(store, prevalence_table(store, taxonomy_id))  # each type's objects listed beside it
    written: list[Path] = []
    skipped: dict[str, str] = {}
    comment = (
        f"FailAtlas taxonomy v{taxonomy.version} ({taxonomy_id}); {taxonomy.code_version}; "
        "95% Wilson score intervals."
    )
    title = table_caption(taxonomy.version, has_runs(frame))
    for fmt in TABLE_FORMATS.names():
        if fmt in formats:
            path = out / f"prevalence.{fmt}"
            path.write_text(TABLE_FORMATS.create(fmt).render(frame, title=title, comment=comment), encoding="utf-8")
            written.append(path)
    if "md" in formats:
        path = out / "failure_types.md"
        path.write_text(types_markdown(taxonomy), encoding="utf-8")
        written.append(path)
    suffixes = [s for s in FIGURE_FORMATS if s in formats]
    if suffixes:
        if frame.height:
            written += prevalence_by_phase(frame, out / "prevalence_by_phase", suffixes)
            by_agent = prevalence(store, taxonomy_id, by="agent")
            agents = [r[0] for r in store.query("SELECT DISTINCT agent FROM runs WHERE agent IS NOT NULL")]
            named = set(by_agent["group"].unique().to_list()) - {UNKNOWN_GROUP} | set(agents)
            if len(named) >= 2:
                written += agent_heatmap(by_agent, out / "agent_heatmap", suffixes, agents=agents)
            else:
                skipped["agent_heatmap"] = (
                    "fewer than two agents are named (imported traces without agents make a single '(unknown)' "
                    "row): nothing to compare"
                )
        else:
            skipped["prevalence_by_phase, agent_heatmap"] = "the taxonomy has no assigned insights"
        runs = funnel(store)
        if runs.height:
            written += funnel_figure(runs, out / "funnel", suffixes)
        else:
            skipped["funnel"] = (
                "the store holds no runs to score (imported traces have no judges or validator)"
            )
    return ExportResult(
        taxonomy_id=taxonomy_id, out_dir=str(out), written=[str(p) for p in written], skipped=skipped
    )
