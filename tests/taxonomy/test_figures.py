"""The paper figures as a reader sees them: no two labels of the funnel overprint, and a stage that no run passes is
drawn (its bar of scored runs and a line at 0), not left as blank paper."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl
from PIL import Image

from failatlas.taxonomy import funnel
from failatlas.taxonomy.figures import funnel_axes, funnel_figure
from failatlas.taxonomy.funnel import STAGES

# The demo's shape (issue 34): nine agents, most of them passing M and failing everything after it, some stages with
# no run scored.
AGENTS = ["gold", "null", "fault-crash", "fault-missing-component", "fault-missing-package", "fault-wrong-constant",
          "fault-fabricated-results", "fault-peek", "fault-timeout (a-very-long-model-name-for-the-title)"]


def _demo_frame() -> pl.DataFrame:
    rows = []
    for k, agent in enumerate(AGENTS):
        for j, stage in enumerate(STAGES):
            n_runs = 0 if (k == 8 and j >= 3) else 5 - (k % 2)
            n_pass = n_runs if agent == "gold" else (n_runs if j == 0 else 0)
            rows.append({"agent": agent, "stage": stage, "n_pass": n_pass, "n_runs": n_runs,
                         "n_unscored": 5 - n_runs, "share": n_pass / n_runs if n_runs else float("nan")})
    return pl.DataFrame(rows)


def _texts(fig) -> list:  # noqa: ANN001
    """Every piece of text drawn: titles, tick labels, bar labels, axis labels."""
    out = [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
           if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())]
    return out


def _assert_no_overlap(fig) -> None:  # noqa: ANN001
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the canvas `savefig` renders the PNG with
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    assert len(boxes) > 20
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), f"{a!r} overprints {b!r}"


def test_funnel_labels_do_not_overlap_and_zero_bars_are_drawn(tmp_path: Path) -> None:
    frame = _demo_frame()
    fig = funnel_axes(frame)
    _assert_no_overlap(fig)
    backs = {p.get_gid(): p for p in fig.findobj(lambda a: getattr(a, "get_gid", lambda: None)() or False)}
    for r in frame.iter_rows(named=True):
        key = f"{r['agent']}|{r['stage']}"
        if r["n_runs"]:
            assert key in backs and backs[key].get_height() == 100, key  # drawn, even where nothing passes
        else:
            assert key not in backs
    labels = [t.get_text() for t in _texts(fig)]
    assert labels.count("0/5") + labels.count("0/4") == sum(1 for r in frame.iter_rows(named=True)
                                                             if r["n_runs"] and not r["n_pass"])
    assert labels.count("n/a") == 2
    # In the PNG, the panel of an agent that passes nothing after M still shows grey bars where the zero bars are.
    (png,) = funnel_figure(frame, tmp_path / "funnel", ("png",))
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    grey = (np.abs(pixels - [230, 230, 230]).max(axis=2) < 6).sum()
    assert grey > 2000, grey


def test_funnel_of_a_real_store(mini_store) -> None:  # noqa: ANN001
    frame = funnel(mini_store)
    assert frame.height
    _assert_no_overlap(funnel_axes(frame))
