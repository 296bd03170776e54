"""What a reader sees of a Streamlit data grid in a real browser: whether every cell's text is whole. The grid is a
canvas (Glide Data Grid), so its column edges are read from its pixels (the header's vertical rules), its texts
from its accessible table, and each text is measured with the grid's own font (canvas `measureText`): a text is
whole when it fits its column on one line, or, where the grid wraps (rows taller than 4rem), on the lines its row
holds. Numbers (the accessible table holds them unformatted) and links other than a task's are not measured."""

from __future__ import annotations

import io

# The grid's texts by column (header first), its font, padding and row count, from the page itself.
_TEXTS = """grid => {
  const table = grid.querySelector('table');
  const host = grid.querySelector('[style*="--gdg-font-family"]') || grid;
  const style = getComputedStyle(host);
  const font = (style.getPropertyValue('--gdg-base-font-style') || '14px').trim() + ' '
             + (style.getPropertyValue('--gdg-font-family') || 'sans-serif').trim();
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = font;
  const size = parseFloat((font.match(/([0-9.]+)px/) || [0, '14'])[1]);  // e.g. '400 14px "Source Sans"'
  const columns = [];
  for (const row of table.querySelectorAll('tr')) {
    for (const cell of row.querySelectorAll('th, td')) {
      const k = parseInt(cell.getAttribute('aria-colindex')) - 1;
      (columns[k] = columns[k] || []).push(cell.innerText.trim());
    }
  }
  // the accessible table holds values, not what the grid draws: numbers unformatted (skipped: a name is text) and
  // links as their URL (a task link draws the task's id; the other links draw a fixed word)
  for (const texts of columns) {
    for (let n = 1; n < texts.length; n++) {
      const t = texts[n];
      if (/^[-+]?[0-9.,]+(e[-+]?[0-9]+)?$/i.test(t)) texts[n] = '';
      else if (t.startsWith('?page=')) texts[n] = texts[0] === 'task' && t.includes('task=')
        ? decodeURIComponent(t.split('task=').pop().replace(/[+]/g, ' ')) : '';
    }
  }
  const words = columns.map(texts => texts.map(
    t => t.split(/\\s+/).filter(Boolean).map(w => ctx.measureText(w).width)));
  const widths = columns.map(texts => texts.map(t => ctx.measureText(t).width));
  const scroller = grid.querySelector('.dvn-scroller');
  return {columns, words, widths, space: ctx.measureText(' ').width, size,
          rows: parseInt(table.getAttribute('aria-rowcount')) - 1,
          scrollHeight: scroller.scrollHeight};
}"""

PADDING = 8.5  # Glide's cellHorizontalPadding as Streamlit sets it, each side


def column_edges(grid) -> tuple[list[tuple[int, int]], int]:  # noqa: ANN001
    """The x ranges (CSS px, from the grid's left) of the grid's columns as drawn, left to right, and the header's
    height, read from a screenshot of the grid: the header's vertical rules, then the first horizontal rule."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(grid.screenshot())).convert("L")).astype(int)
    background = int(np.median(pixels[5]))
    right = pixels.shape[1] - 1
    rules = [0, *(x for x in range(3, right - 2) if pixels[5, x] < background - 8), right]  # with the borders
    edges = [x for k, x in enumerate(rules) if k == 0 or x > rules[k - 1] + 1]  # a rule may be 2 px wide
    spans = list(zip(edges, edges[1:], strict=False))
    inside = spans[-1][0] + 3  # the padding right of a rule: no text there
    header = next((y for y in range(8, pixels.shape[0]) if pixels[y, inside] < background - 8), 35)
    return spans, header


def _lines(words: list[float], space: float, room: float) -> int:
    """Lines a text of words this wide takes in `room` px, wrapped at its spaces (a word wider than the room: cut)."""
    lines, used = 1, 0.0
    for w in words:
        if w > room:
            return 10**6
        if used and used + space + w > room:
            lines, used = lines + 1, w
        else:
            used = used + space + w if used else w
    return lines


def cut_cells(grid) -> list[str]:  # noqa: ANN001
    """'column: text' for every text of the grid (headers included) that the reader cannot see whole."""
    data = grid.evaluate(_TEXTS)
    spans, header = column_edges(grid)
    columns = data["columns"]
    spans = spans[len(spans) - len(columns):]  # the row selection boxes, when the grid has them, come first
    row_height = (data["scrollHeight"] - header) / max(data["rows"], 1)
    wraps = row_height > 64
    lines_held = max(1, int((row_height - 6) // (data["size"] * 1.25))) if wraps else 1
    cut = []
    for k, texts in enumerate(columns):
        if k >= len(spans):
            cut += [f"{texts[0]}: the column is not drawn"]
            continue
        room = spans[k][1] - spans[k][0] - 2 * PADDING
        for n, text in enumerate(texts):
            if not text:
                continue
            held = 1 if n == 0 else lines_held  # a header never wraps
            need = (1 if data["widths"][k][n] <= room + 0.5 else 10**6) if held == 1 else _lines(
                data["words"][k][n], data["space"], room)
            if need > held:
                cut.append(f"{texts[0]}: {text}")
    return cut


def not_scrolled(grid) -> None:  # noqa: ANN001
    """No column of the grid lies past its right edge (it needs no horizontal scrolling)."""
    width, room = grid.locator(".dvn-scroller").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= room + 1, f"the table is {width} px wide in {room} px"
