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


def _short(text: str, width: int = 38) -> str:
    return textwrap.shorten(text, width=width, placeholder="…")


def prevalence_by_phase(
    frame: pl.DataFrame, stem: Path, suffixes: Sequence[str] = ("png", "pdf")
) -> list[Path]:
    """Horizontal bars: share of each phase's insights per failure type, with 95% CIs and counts."""
    phases = list(dict.fromkeys(frame["phase"].to_list()))
    heights = [max(frame.filter(pl.col("phase") == p).height, 1) for p in phases]
    fig = _figure(7.5, 0.8 + 0.32 * sum(heights) + 0.5 * len(phases))
    axes = fig.subplots(len(phases), 1, squeeze=False, height_ratios=heights)[:, 0]
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

            handles = [Patch(color=colour[c], label=_short(c, 40)) for c in categories]
            ax.legend(handles=handles, fontsize=6, loc="lower right", title="category", title_fontsize=7)
        ax.set_yticks(
            y,
            [f"{_short(n)} (n={c})" for n, c in zip(part["failure_type"], part["count"], strict=True)],
            fontsize=7,
        )
        ax.set_title(f"{phase} (N={int(part['total'][0])})", fontsize=9, loc="left")
        ax.set_xlabel("share of the phase's insights (%)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlim(0, max(100 * float(part["ci_high"].max()), 1) * 1.05)
    return _save(fig, stem, suffixes)


def agent_heatmap(
    frame: pl.DataFrame, stem: Path, suffixes: Sequence[str] = ("png", "pdf"), *, max_types: int = 20
) -> list[Path]:
    """Agents (rows) by failure types (columns): share of the agent's insights in the phase,
    count in each cell.
    `frame` is `prevalence(..., by='agent')`; the `max_types` most frequent types overall are shown."""
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
        _short(f"{p}: {n}" if several_phases else n, 40)
        for p, n in zip(top["phase"], top["failure_type"], strict=True)
    ]
    agents = sorted(frame["group"].unique().to_list())
    share = np.zeros((len(agents), len(type_ids)))
    count = np.zeros((len(agents), len(type_ids)), dtype=int)
    pos_a = {a: k for k, a in enumerate(agents)}
    pos_t = {t: k for k, t in enumerate(type_ids)}
    for r in frame.filter(pl.col("failure_type_id").is_in(type_ids)).iter_rows(named=True):
        share[pos_a[r["group"]], pos_t[r["failure_type_id"]]] = 100 * r["share"]
        count[pos_a[r["group"]], pos_t[r["failure_type_id"]]] = r["count"]
    fig = _figure(2.5 + 0.42 * len(type_ids), 3.2 + 0.4 * len(agents))
    ax = fig.subplots()
    image = ax.imshow(share, cmap="Blues", aspect="auto", vmin=0)
    ax.set_xticks(range(len(type_ids)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(agents)), agents, fontsize=8)
    peak = share.max() if share.size else 0
    for a in range(len(agents)):
        for t in range(len(type_ids)):
            ax.text(
                t,
                a,
                str(count[a, t]),
                ha="center",
                va="center",
                fontsize=6,
                color="white" if share[a, t] > 0.6 * peak else "black",
            )
    fig.colorbar(image, ax=ax, label="share (%)", shrink=0.9)
    ax.set_title(
        "share of each agent's insights in the phase (colour) and count (cell)", fontsize=9, loc="left"
    )
    return _save(fig, stem, suffixes)


def funnel_figure(frame: pl.DataFrame, stem: Path, suffixes: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Grouped bars: share of runs passing each conjunctive stage, per agent, labelled k/n."""
    from failatlas.taxonomy.funnel import STAGES

    agents = sorted(frame["agent"].unique().to_list())
    fig = _figure(7.0, 3.6)
    ax = fig.subplots()
    width = 0.8 / max(len(agents), 1)
    for k, agent in enumerate(agents):
        part = frame.filter(pl.col("agent") == agent)
        by_stage = {r["stage"]: r for r in part.iter_rows(named=True)}
        x = np.arange(len(STAGES)) + (k - (len(agents) - 1) / 2) * width
        values = [100 * by_stage[s]["share"] for s in STAGES]
        bars = ax.bar(x, values, width=width, label=agent)
        for bar, s in zip(bars, STAGES, strict=True):
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                bar.get_height() + 1,
                f"{by_stage[s]['n_pass']}/{by_stage[s]['n_runs']}",
                ha="center",
                fontsize=6,
            )
    ax.set_xticks(range(len(STAGES)), STAGES)
    ax.set_ylabel("runs passing (%)")
    ax.set_ylim(0, 110)
    ax.set_title(
        "conjunctive score: M monitor, C conclusion, D design, I implementation, E execution",
        fontsize=8,
        loc="left",
    )
    ax.legend(fontsize=7)
    return _save(fig, stem, suffixes)
