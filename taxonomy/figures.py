"""Figures for papers: prevalence per phase, agent-by-failure-type heatmap, conjunctive-score funnel.

Each function takes the frame the tables use and writes one file per suffix (png, pdf). Figures are built
with `matplotlib.figure.Figure` (the Agg canvas), never pyplot, so nothing depends on a display or
global state.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from failatlas.bench_core.agent_order import ordered_agents
from failatlas.core.errors import MissingDependencyError
from failatlas.taxonomy.model import phase_rank


def _figure(width: float, height: float):  # noqa: ANN202
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "mining") from exc
    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, stem: Path, suffixes: Sequence[str]) -> list[Path]:  # noqa: ANN001
    paths = []
    for suffix in suffixes:
        path = stem.with_suffix(f".{suffix}")
        fig.savefig(path, dpi=200)
        paths.append(path)
    return paths


_PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


_BAR_COLOURS = [c for c in _PALETTE if c != "#8C8C8C"]  # grey stands for the runs scored


def _wrap(text: str, width: int = 42) -> str:
    """A label on as many lines as it needs: never cut, so a reader sees the whole name."""
    return "\n".join(textwrap.wrap(" ".join(str(text).split()), width=width, break_long_words=True)) or "–"


def prevalence_by_phase(
    frame: pl.DataFrame, stem: Path, suffixes: Sequence[str] = ("png", "pdf"), *, unit: str = "insights"
) -> list[Path]:
    """Horizontal bars: share of each phase's insights per failure type, with 95% CIs and counts. One panel per
    phase that has types, one shared x scale; names wrap, never cut; the category legend sits beside the panel,
    never over its bars."""
    frame = frame.filter(pl.col("count") > 0).with_columns(  # rows without an interval (a paper filter) show none
        pl.coalesce("ci_low", "share").alias("ci_low"), pl.coalesce("ci_high", "share").alias("ci_high"))
    phases = list(dict.fromkeys(frame["phase"].to_list()))
    labels = {
        p: [f"{_wrap(n)} (n={c})" for n, c in zip(*frame.filter(pl.col("phase") == p).reverse()
                                                   .select("failure_type", "count").get_columns(), strict=True)]
        for p in phases
    }
    heights = [sum(label.count("\n") * 0.55 + 1 for label in labels[p]) for p in phases]
    fig = _figure(8.0, 0.9 + 0.3 * sum(heights) + 0.55 * len(phases))
    axes = fig.subplots(len(phases), 1, squeeze=False, height_ratios=heights, sharex=True)[:, 0]
    top = max(100 * float(frame["ci_high"].max()), 1) * 1.05
    for ax, phase in zip(axes, phases, strict=True):
        part = frame.filter(pl.col("phase") == phase).reverse()
        share = part["share"].to_numpy() * 100
        low = share - part["ci_low"].to_numpy() * 100
        high = part["ci_high"].to_numpy() * 100 - share
        y = np.arange(part.height)
        categories = list(dict.fromkeys(part["category"].fill_null("").to_list()[::-1]))
        colour = {c: _PALETTE[k % len(_PALETTE)] for k, c in enumerate(categories)}
        colours = [colour[c] for c in part["category"].fill_null("").to_list()]
        ax.barh(y, share, xerr=[low, high], color=colours, ecolor="#333333", capsize=2)
        if len(categories) > 1:
            from matplotlib.patches import Patch

            handles = [Patch(color=colour[c], label=_wrap(c or "(none)", 30)) for c in categories]
            ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      title="category", title_fontsize=7, frameon=False)
        ax.set_yticks(y, labels[phase], fontsize=7)
        ax.set_title(f"{phase} (N={int(part['total'][0])} {unit})", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7, labelbottom=True)
        ax.set_xlim(0, top)
    axes[-1].set_xlabel(f"share of the phase's {unit} (%), 95% CI", fontsize=8)
    return _save(fig, stem, suffixes)


def agent_heatmap(
    frame: pl.DataFrame,
    stem: Path,
    suffixes: Sequence[str] = ("png", "pdf"),
    *,
    max_types: int = 20,
    agents: Sequence[str] = (),
) -> list[Path]:
    """Failure types (rows) by agents (columns): the share (%) of the agent's insights in the phase that fall in
    the type, as colour and as the number in the cell (one quantity). `frame` is `prevalence(..., by='agent')`;
    the `max_types` most frequent types overall are shown. `agents` adds agents that have runs but no insight
    (e.g. `gold`): their column says `–` (no insight to share), rather than hiding them."""
    top = (
        frame.group_by("failure_type_id", "failure_type", "phase")
        .agg(pl.col("count").sum())
        .sort(["count", "failure_type_id"], descending=[True, False])
        .head(max_types)
        .with_columns(pl.col("phase").map_elements(phase_rank, return_dtype=pl.Int64).alias("_rank"))
        .sort(["_rank", "count", "failure_type_id"], descending=[False, True, False])
    )
    type_ids = top["failure_type_id"].to_list()
    several_phases = top["phase"].n_unique() > 1
    labels = [
        _wrap(f"{p}: {n}" if several_phases else n, 48)
        for p, n in zip(top["phase"], top["failure_type"], strict=True)
    ]
    columns = ordered_agents([*frame["group"].unique().to_list(), *agents])
    insights = {a: int(frame.filter(pl.col("group") == a)["count"].sum()) for a in columns}
    share = np.full((len(type_ids), len(columns)), np.nan)
    pos_a = {a: k for k, a in enumerate(columns)}
    pos_t = {t: k for k, t in enumerate(type_ids)}
    for r in frame.filter(pl.col("failure_type_id").is_in(type_ids)).iter_rows(named=True):
        share[pos_t[r["failure_type_id"]], pos_a[r["group"]]] = 100 * r["share"]
    for a in columns:  # an agent with insights in the phase but none of this type: 0%, not unknown
        if insights[a]:
            col = share[:, pos_a[a]]
            col[np.isnan(col)] = 0.0
    lines = sum(label.count("\n") + 1 for label in labels)
    fig = _figure(3.6 + 0.95 * len(columns), 1.3 + 0.22 * lines + 0.12 * len(type_ids))
    ax = fig.subplots()
    from matplotlib import colormaps

    cmap = colormaps["Blues"].with_extremes(bad="#EEEEEE")
    image = ax.imshow(np.ma.masked_invalid(share), cmap=cmap, aspect="auto", vmin=0, vmax=100)
    ax.set_yticks(range(len(type_ids)), labels, fontsize=7)
    ax.xaxis.tick_top()
    ax.set_xticks(range(len(columns)), [f"{a} ({insights[a]} insights)" for a in columns], fontsize=7,
                  rotation=35, ha="left", rotation_mode="anchor")  # long agent names never overlap
    for t in range(len(type_ids)):
        for a in range(len(columns)):
            value = share[t, a]
            ax.text(a, t, "–" if np.isnan(value) else f"{value:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if value > 55 else "black")
    fig.colorbar(image, ax=ax, label="share of the agent's insights in the phase (%)", shrink=0.8)
    return _save(fig, stem, suffixes)


def funnel_axes(frame: pl.DataFrame):  # noqa: ANN201 - a matplotlib Figure
    """The funnel as a Figure: one small panel per agent (a grid of up to three columns), five bars each (M, M·C,
    ..., M·C·D·I·E). Behind each bar a light one stands for the runs scored there (100%), so a stage no run passes
    still shows, with a dark line at 0; each bar is labelled k/n inside its own panel, so no two labels meet; a stage
    with no run scored says 'n/a'. Each background bar's gid is 'agent|stage' (for tests)."""
    from failatlas.taxonomy.funnel import STAGES

    agents = ordered_agents(frame["agent"].unique().to_list())
    ncols = min(3, max(len(agents), 1))
    nrows = max(1, -(-len(agents) // ncols))
    fig = _figure(2.5 * ncols + 0.4, 1.9 * nrows + 0.7)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    x = np.arange(len(STAGES))
    for k, ax in enumerate(axes.flat):
        if k >= len(agents):
            ax.set_visible(False)
            continue
        agent = agents[k]
        by_stage = {r["stage"]: r for r in frame.filter(pl.col("agent") == agent).iter_rows(named=True)}
        colour = _BAR_COLOURS[k % len(_BAR_COLOURS)]
        for j, stage in enumerate(STAGES):
            r = by_stage.get(stage)
            scored = bool(r and r["n_runs"])
            if not scored:
                ax.text(j, 4, "n/a", ha="center", va="bottom", fontsize=6.5, color="#666666")
                continue
            back = ax.bar(j, 100, width=0.72, color="#E6E6E6", edgecolor="#BBBBBB", linewidth=0.5)[0]
            back.set_gid(f"{agent}|{stage}")
            share = 100 * r["n_pass"] / r["n_runs"]
            ax.bar(j, share, width=0.72, color=colour)
            ax.hlines(0, j - 0.36, j + 0.36, color="#222222", linewidth=1.6)
            inside = share > 80
            ax.text(j, share - 4 if inside else share + 3, f"{r['n_pass']}/{r['n_runs']}", ha="center",
                    va="top" if inside else "bottom", fontsize=6.5, color="white" if inside else "#222222")
        ax.set_title(_wrap(agent, 34), fontsize=7.5, loc="left")
        ax.set_ylim(0, 112)
        ax.set_yticks([0, 50, 100])
        ax.tick_params(labelsize=6.5, length=2)
        ax.set_xticks(x, STAGES, rotation=35, ha="right", rotation_mode="anchor", fontsize=6.5)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("runs passing (%)", fontsize=7)
    fig.suptitle("Conjunctive score per agent: M monitor, C conclusion, D design, I implementation, E execution "
                 "(k/n runs; grey: runs scored)", fontsize=7.5, x=0.01, ha="left")
    return fig


def funnel_figure(frame: pl.DataFrame, stem: Path, suffixes: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """The funnel (`funnel_axes`) written as PNG and PDF."""
    return _save(funnel_axes(frame), stem, suffixes)
