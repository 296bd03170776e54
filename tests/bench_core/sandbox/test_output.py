"""The capped output buffer keeps the head and the tail in bounded memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from failatlas.bench_core.sandbox.output import CappedBuffer

ascii_chunks = st.lists(st.text(alphabet="abcxyz\n", max_size=300), max_size=30)


@given(ascii_chunks, st.integers(min_value=0, max_value=500))
def test_keeps_head_and_tail_of_what_was_written(chunks: list[str], limit: int) -> None:
    buf = CappedBuffer(limit)
    for c in chunks:
        buf.write(c.encode())
    data = "".join(chunks)
    assert buf.total == len(data)
    assert buf.truncated == (len(data) > limit)
    if not buf.truncated:
        assert buf.text() == data
        return
    assert buf.dropped == len(data) - limit
    text = buf.text()
    assert text.startswith(data[: limit - limit // 2])
    assert f"[... {buf.dropped} bytes truncated ...]" in text
    if limit // 2:
        assert text.endswith(data[-(limit // 2):])
