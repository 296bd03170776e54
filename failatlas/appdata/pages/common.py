"""What every page shares: the context (store path, status, chosen taxonomy), navigation through query
parameters, formatting, and the "what to run next" notice for empty or partial stores."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import polars as pl
import streamlit as st

from failatlas.appdata.cache import q
from failatlas.appdata.queries_store import StoreStatus, next_steps
from failatlas.core.tables import interval_text

# Query parameters the pages read; navigating to a page drops the others unless they are passed again.
PARAMS = ("page", "taxonomy", "failure_type", "insight", "run", "entry", "search", "mode", "unit", "by", "value",
          "phase", "colour", "left", "right")


@dataclass
class Context:
    path: str
    status: StoreStatus
    taxonomy_id: str | None

    def q(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return q(self.path, name, *args, **kwargs)


# The ASCII punctuation that can start a Markdown, GFM or Streamlit construct (images, links, HTML, autolinks,
# lists, colours, math; Streamlit rewrites `:material/` before parsing, hence `/`): CommonMark renders each
# backslash-escaped one as itself. The rest (, ; ? ' " %) stay.
_MARKUP = re.compile(r"""([!#$&()*+\-./:<=>@\[\\\]^_`{|}~])""")
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=\bwww)(?=\.)|(?=@)", re.IGNORECASE)


def md(text: object) -> str:
    """`text` (from the store, a task, an LLM, the URL) as Markdown that renders as the text: no image, link,
    HTML, heading or list. Line breaks are kept. Use it for every value put into st.markdown, st.caption,
    st.info/warning/error, headers and widget labels (Streamlit renders Markdown in labels too); show long texts
    with st.text. GFM turns URLs and e-mail addresses in the parsed text into links, escaped or not, so an
    invisible word joiner (U+2060) is put into `://`, `www.` and before `@`."""
    text = _AUTOLINK.sub("\u2060", str(text))
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "  \n".join(_MARKUP.sub(r"\\\1", line) for line in lines)


def code(text: object) -> str:
    """`text` as one Markdown code span: shown verbatim in monospace, whatever backticks it holds."""
    flat = " ".join(str(text).split()) or "–"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}" if "`" in flat else f"{fence}{flat}{fence}"


def md_message(text: object) -> str:
    """One of our own messages (an action's outcome, an error with its hint) as Markdown: what it quotes in
    backticks (`taxonomy build`) shown as code, the rest through `md()`. A backtick in a quoted name can only
    start a code span, which shows its text verbatim."""
    parts = re.split(r"`([^`\n]+)`", str(text))
    return "".join(code(part) if k % 2 else md(part) for k, part in enumerate(parts))


def param(name: str) -> str | None:
    value = st.query_params.get(name)
    return value or None


def go(page: str, **params: str | None) -> None:
    """Switch to `page` with these query parameters (a bookmarkable URL) and rerun."""
    st.query_params.from_dict({"page": page, **{k: v for k, v in params.items() if v}})
    st.rerun()


def keep(**params: str | None) -> None:
    """Write these view settings (a filter, a unit, a phase) into the URL without a rerun, so the view can be
    shared; None or '' removes one."""
    for name, value in params.items():
        if value:
            if st.query_params.get(name) != value:
                st.query_params[name] = value
        elif name in st.query_params:
            del st.query_params[name]


# session state: per widget whose value the URL holds, (its key's version, the value it last wrote into the URL)
URL_KEYS = "_url_keys"


def url_key(name: str, url_value: object) -> str:
    """The key of a widget whose value the URL holds (it writes each pick back, then calls wrote_url): a new key,
    so a new widget that takes the URL's value, only when that value changed from elsewhere (a fresh load, a link,
    go()); the same key while a person picks. A key made of the URL's value on each run made every pick, once
    written back, a new widget, which dropped the next pick: every second pick did nothing."""
    versions = st.session_state.setdefault(URL_KEYS, {})
    version, written = versions.get(name, (0, None))
    if name not in versions or written != url_value:
        version += 1
        versions[name] = (version, url_value)
    return f"{name}_{version}"


def wrote_url(name: str, value: object) -> None:
    """The value the widget of url_key(name, ...) now holds in the URL (compared with the URL's on the next run)."""
    versions = st.session_state.setdefault(URL_KEYS, {})
    versions[name] = (versions.get(name, (1, None))[0], value)


def request_scroll(anchor: str) -> None:
    """Ask the next render to bring the header with this anchor into view (e.g. a run just opened)."""
    st.session_state["_scroll_to"] = anchor


def scroll_if_requested(anchor: str) -> None:
    """Bring the element `#anchor` to the top of the viewport once, when `request_scroll(anchor)` asked for it:
    Streamlit keeps the scroll position across reruns, so a newly opened section would otherwise appear far
    above or below what the user is looking at. The script is our own constant text (the anchor is one of the
    app's section names, JSON-quoted), run by `st.html` in the page itself."""
    if st.session_state.get("_scroll_to") != anchor:
        return
    del st.session_state["_scroll_to"]
    import time

    st.html(f"<script>{scroll_script(anchor)}</script><!-- {time.monotonic_ns()} -->", unsafe_allow_javascript=True,
            width="content")


def scroll_script(anchor: str) -> str:
    """The JavaScript that brings `#anchor` to the top. It runs as soon as Streamlit mounts it, while the rest of
    the page may still be laid out (grids and charts take their height later): for up to 2 s it brings the header
    back to the top when the layout moved it, and stops as soon as anything else scrolled the page (the reader).
    It holds no '<' before a letter, digit or '/': DOMPurify, which st.html applies, drops a script whose text has
    one."""
    import json

    return ("(function(){const id=" + json.dumps(anchor) + ";let n=0,box=null,mine=null;"
            "function parent(e){for(let p=e.parentElement;p;p=p.parentElement){"
            "const o=getComputedStyle(p).overflowY;"
            "if((o==='auto'||o==='scroll')&&p.scrollHeight>p.clientHeight){return p;}}"
            "return document.scrollingElement;}"
            "function go(){const el=document.getElementById(id);"
            "if(el){if(box===null){box=parent(el);}if(mine!==null&&box.scrollTop!==mine){return;}"
            "if(Math.abs(el.getBoundingClientRect().top-box.getBoundingClientRect().top)>80||mine===null)"
            "{el.scrollIntoView({block:'start'});mine=box.scrollTop;}}"
            "if(40>n++){setTimeout(go,50);}}go();})();")


def link(page: str, **params: str | None) -> str:
    """A relative URL that opens `page` with these parameters."""
    from urllib.parse import urlencode

    return "?" + urlencode({"page": page, **{k: v for k, v in params.items() if v}})


def show_next_steps(ctx: Context, need: tuple[str, ...]) -> bool:
    """Tell the user what to run when the store lacks what this page needs; True when the page can go on."""
    steps = next_steps(ctx.status, need)
    if not steps:
        return True
    st.info("This page has nothing to show yet. Next:\n\n" + "\n".join(f"- {s}" for s in steps))
    return False


def interval(low: float | None, high: float | None, digits: int = 1) -> str:
    """A 95% interval in percent, as every export and command prints it (`failatlas.core.tables.interval_text`):
    '–' only where there is none (a phase's only type holds 100% of its insights by construction)."""
    return interval_text(low, high, digits=digits)


def with_intervals(frame: pl.DataFrame, prefix: str = "") -> pl.DataFrame:
    """Adds a printable 95% CI column (percent) from `ci_low`/`ci_high`."""
    lo, hi = f"{prefix}ci_low", f"{prefix}ci_high"
    return frame.with_columns(
        pl.struct(lo, hi).map_elements(lambda r: interval(r[lo], r[hi]), return_dtype=pl.Utf8)
        .alias(f"{prefix}95% CI (%)"))


def paginate(total: int, key: str, page_size: int = 50) -> tuple[int, int]:
    """A page selector; returns (limit, offset)."""
    pages = max(1, -(-total // page_size))
    if pages == 1:
        return page_size, 0
    page = st.number_input(f"Page (of {pages}, {total:,} rows)", min_value=1, max_value=pages, value=1, key=key)
    return page_size, (int(page) - 1) * page_size


# Tables are laid out for the researcher's screen of issues 34 and 42: 1440 px wide, beside the sidebar, the main
# column holds about TABLE_WIDTH px (main.py narrows the page's side padding). Glide's grid draws 14 px Source Sans;
# CHAR_PX over-estimates its mean character width, so a column sized by it holds its text.
TABLE_WIDTH = 1060
CHAR_PX = 7.4
CELL_PADDING = 20
LINE_PX = 20


def text_px(texts: list[object]) -> int:
    """The width a grid column needs to show each of these texts on one line."""
    return math.ceil(max((len(str(t)) for t in texts if t is not None), default=1) * CHAR_PX) + CELL_PADDING


def fit_text_columns(frame: pl.DataFrame, names: dict[str, str], fixed: int, *, most: int = 520
                     ) -> tuple[dict[str, Any], int | None]:
    """Column configs (pixel widths) for the text columns `names` (column -> header) of a grid whose other columns
    take `fixed` px, and the row height it needs: each column as wide as its longest text (at most `most` px);
    where the columns do not fit TABLE_WIDTH, the room is shared by need and the texts wrap at their spaces on as
    many lines as the longest needs (Streamlit wraps a grid's text only in rows taller than 4rem). No name is cut:
    a table either fits or wraps (issue 42)."""
    need = {c: min(max(text_px([h]), text_px(frame[c].to_list())), most) for c, h in names.items()}
    space, left = float(max(TABLE_WIDTH - fixed, 0)), dict(need)
    while left:  # the columns that need less than an equal share get what they need; the others share the rest
        share = space / len(left)
        small = {c: n for c, n in left.items() if n <= share}
        if not small:
            need |= {c: max(int(share), _longest_word_px(frame[c].to_list() + [names[c]])) for c in left}
            break
        space -= sum(small.values())
        left = {c: n for c, n in left.items() if c not in small}
    lines = 1
    for c, width in need.items():
        for text in frame[c].to_list():
            lines = max(lines, _wrapped_lines(str(text or ""), width - CELL_PADDING))
    configs = {c: st.column_config.TextColumn(names[c], width=need[c]) for c in names}
    return configs, None if lines == 1 else max(66, 10 + LINE_PX * lines)


def _longest_word_px(texts: list[object]) -> int:
    return math.ceil(max((len(w) for t in texts for w in str(t or "").split()), default=1) * CHAR_PX) + CELL_PADDING


def _wrapped_lines(text: str, room: float) -> int:
    """Lines `text` takes in `room` px, wrapped at spaces, by the CHAR_PX estimate."""
    lines, used = 1, 0.0
    for word in text.split():
        width = len(word) * CHAR_PX
        if used and used + CHAR_PX + width > room + 0.5:
            lines, used = lines + 1, width
        else:
            used = used + CHAR_PX + width if used else width
    return lines
