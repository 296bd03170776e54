"""The app's text columns (issue 42): as wide as their longest text where the table fits the 1440 px layout, else
sharing the room and wrapping, never narrower than their longest word (a word cannot wrap)."""

from __future__ import annotations

import polars as pl

from failatlas.appdata.pages.common import CELL_PADDING, CHAR_PX, TABLE_WIDTH, fit_text_columns


def test_names_that_fit_keep_one_line_and_their_width():
    frame = pl.DataFrame({"category": ["–"], "failure_type": ["No experiment design written"]})
    configs, row_height = fit_text_columns(frame, {"category": "category", "failure_type": "failure type"},
                                           fixed=505)
    assert row_height is None
    assert configs["failure_type"]["width"] >= len("No experiment design written") * CHAR_PX + CELL_PADDING
    assert configs["category"]["width"] >= len("category") * CHAR_PX  # the header too


def test_long_texts_share_the_room_and_wrap_and_short_columns_keep_their_need():
    text = "Masked function `kmeans.py::kmeanspp_init` left unimplemented (NotImplementedError in 4 hidden tests) " * 3
    frame = pl.DataFrame({"text": [text, "short"], "phase": ["implementation", "design"],
                          "id": ["3660e77c4dd21d78"] * 2})
    configs, row_height = fit_text_columns(frame, {"text": "insight", "phase": "phase", "id": "id"}, fixed=255)
    widths = {c: configs[c]["width"] for c in configs}
    assert sum(widths.values()) <= TABLE_WIDTH - 255 + 1  # the table fits: no sideways scrolling
    assert widths["phase"] >= len("implementation") * CHAR_PX + CELL_PADDING  # short names are never wrapped
    assert widths["id"] >= len("3660e77c4dd21d78") * CHAR_PX + CELL_PADDING  # nor ids, which cannot wrap
    assert row_height is not None and row_height > 64  # Streamlit wraps a grid's text only in rows over 4rem
    lines = (row_height - 10) // 20
    assert lines * (widths["text"] - CELL_PADDING) >= len(text) * CHAR_PX  # enough lines for the whole text
