"""A task id never leaves the store's `references/` folder when a reference bundle is written (review B, 2)."""

from __future__ import annotations

import contextlib

from failatlas.bench_core.task_validation import reference
from failatlas.bench_core.tasks.model import TaskSpec
from failatlas.store import open_store


def test_a_task_id_shaped_like_a_path_writes_inside_references(tmp_path):
    store = open_store(tmp_path / "deep" / "store.duckdb")
    base, ref = tmp_path / "base", tmp_path / "ref"
    for folder, text in ((base, "x = 1\n"), (ref, "x = 2\n")):
        folder.mkdir()
        (folder / "a.py").write_text(text)
    task = TaskSpec.model_validate({"id": "ok", "benchmark": "rexbench", "kind": "extension", "question": "q",
                                    "repository": {"local_path": str(base)}})
    hostile = task.model_copy(update={"id": "x/../../../ESCAPED"})  # as a catalog row written before the id check
    with contextlib.suppress(Exception):  # what follows the write (a repository cache) is not under test
        reference.with_reference(store, hostile, base, ref)
    assert not list(tmp_path.glob("ESCAPED*"))
    assert ["ESCAPED" in p.name for p in (tmp_path / "deep" / "references").iterdir()] == [True]


def test_bundle_names_are_slugs():
    assert reference.bundle_name("exp-bench:foo/bar", "abc") == "exp-bench-foo-bar-abc"
    assert "/" not in reference.bundle_name("../../etc", "abc")
