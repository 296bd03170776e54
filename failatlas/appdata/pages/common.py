"""What every page shares: the context (store path, status, chosen taxonomy), navigation through query
parameters, formatting, and the "what to run next" notice for empty or partial stores."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl
import streamlit as st

from failatlas.appdata import queries
from failatlas.appdata.cache import q
from failatlas.core.tables import interval_text

# Query parameters the pages read; navigating to a page drops the others unless they are passed again.
PARAMS = ("page", "taxonomy", "failure_type", "insight", "run", "entry", "search", "mode", "unit", "by", "value",
          "phase", "colour", "left", "right")


@dataclass
class Context:
    path: str
    status: queries.StoreStatus
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
    steps = queries.next_steps(ctx.status, need)
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
