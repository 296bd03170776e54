"""`ingest file` of hostile inputs (review B, sections 1 and 7): a link out of the folder, a FIFO, a file name
that is not UTF-8. Each is an InputError naming the file; nothing is written."""

from __future__ import annotations

import os

import pytest

from failatlas.core.errors import InputError
from failatlas.ingest import run_file
from failatlas.ingest.model import FileIngestParams
from failatlas.store import open_store

ROW = b'{"text": "the agent failed to load the data set"}\n'


def _ingest(tmp_path, *paths):
    store = open_store(tmp_path / "s.duckdb")
    try:
        run_file(store, FileIngestParams(paths=list(paths)))
    finally:
        with store.read() as conn:
            assert conn.execute("SELECT count(*) FROM insights").fetchone()[0] == 0


def test_a_file_linked_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "private.jsonl").write_bytes(ROW)
    folder = tmp_path / "ins"
    folder.mkdir()
    (folder / "x.jsonl").symlink_to(tmp_path / "private.jsonl")
    with pytest.raises(InputError, match="x.jsonl: is a link out of the import folder"):
        _ingest(tmp_path, folder)
    with pytest.raises(InputError, match="x.jsonl: is a link out of the import folder"):
        _ingest(tmp_path, folder / "x.jsonl")


def test_a_fifo_in_the_folder_is_refused(tmp_path):
    folder = tmp_path / "ins"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(ROW)
    os.mkfifo(folder / "b.jsonl")
    with pytest.raises(InputError, match=r"b.jsonl: is not a regular file \(a FIFO\)"):
        _ingest(tmp_path, folder)


def test_a_file_name_that_is_not_utf8_is_an_error_naming_it(tmp_path):
    folder = tmp_path / "ins"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"bad\xffname.jsonl"), "wb") as handle:  # noqa: PTH123
        handle.write(ROW)
    with pytest.raises(InputError, match=r"bad\\xffname.jsonl: the file name is not UTF-8"):
        _ingest(tmp_path, folder)


def test_a_nan_label_or_run_id_is_no_value_not_the_text_nan():
    from failatlas.ingest.importers.base import as_text

    assert as_text(float("nan")) is None and as_text(float("inf")) is None and as_text(-float("inf")) is None
    assert as_text(1.5) == "1.5" and as_text(" x ") == "x" and as_text("") is None
