"""`repos.add` and `repos.fetch` over a real store and real git: pins, bindings, replacements, failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from failatlas.bench_core.repos import (
    AddParams,
    FetchParams,
    add,
    fetch,
    list_repositories,
    repository_for,
)
from failatlas.bench_core.tasks import TaskImportParams, get_task, list_tasks, save_tasks
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.bench_core.tasks.model import RepoRef, TaskKind, TaskSpec
from failatlas.core.errors import InputError, NotFoundError

from .test_tarballs import README_COMMITS

PAPERS = {"18439": ("apple__ml-calibration.tar.gz", "https://github.com/apple/ml-calibration"),
          "18244": ("Hank0626__PDF.tar.gz", "https://github.com/Hank0626/PDF")}


def _task(task_id: str, url: str | None = None, commit: str | None = None, local_path: str | None = None):
    return TaskSpec(id=task_id, benchmark="rexbench", kind=TaskKind.EXTENSION, question="extend it",
                    repository=RepoRef(url=url, commit=commit, local_path=local_path))


def test_the_real_tarballs_are_cached_at_their_commits_for_their_papers_tasks(expbench_store, repos_data, tmp_path):
    cache = tmp_path / "cache"
    for paper, (tarball, url) in PAPERS.items():
        result = add(expbench_store, AddParams(source=str(repos_data / tarball), cache_dir=cache))
        assert (result.action, result.entry.url) == ("added", url)
        assert result.entry.commit == README_COMMITS[tarball] and result.entry.commit_from == "tar-header"
        assert any("from the tarball's name" in note for note in result.notes)
        tasks = list_tasks(expbench_store, paper=paper)
        assert tasks
        for row in tasks:
            found = repository_for(expbench_store, get_task(expbench_store, row["id"]))
            assert found is not None and found.commit == README_COMMITS[tarball] and found.url == url
            assert found.path == result.entry.path and found.path.parent == cache.resolve()
    assert (cache.resolve() / "github.com_apple_ml-calibration-18ff21a7e4e4" / "README.md").is_file()
    assert not list(cache.glob(".staging-*"))
    other = get_task(expbench_store, list_tasks(expbench_store, paper="19292")[0]["id"])
    assert other.repository.url and repository_for(expbench_store, other) is None
    runs = expbench_store.query_dicts("SELECT stage, status, rows FROM stage_runs WHERE stage = 'repos.add'")
    assert [(r["status"], json.loads(r["rows"])) for r in runs] == [("ok", {"repositories": 1})] * 2


def test_a_tarball_named_for_a_url_no_task_names_needs_url(store, repos_data, tmp_path):
    with pytest.raises(InputError, match="no URL is known") as err:
        add(store, AddParams(source=str(repos_data / "Hank0626__PDF.tar.gz"), cache_dir=tmp_path / "c"))
    assert "--url" in err.value.hint
    assert list_repositories(store) == []


def test_readding_is_a_no_op_and_a_deleted_folder_is_no_checkout(expbench_store, repos_data, tmp_path):
    source = str(repos_data / "apple__ml-calibration.tar.gz")
    first = add(expbench_store, AddParams(source=source, cache_dir=tmp_path / "c"))
    again = add(expbench_store, AddParams(source=source, url="https://github.com/apple/ml-calibration.git",
                                          cache_dir=tmp_path / "c"))
    assert again.action == "unchanged" and again.entry.path == first.entry.path
    assert again.entry.added_at == first.entry.added_at
    task = get_task(expbench_store, list_tasks(expbench_store, paper="18439")[0]["id"])
    shutil.rmtree(first.entry.path)
    assert repository_for(expbench_store, task) is None
    restored = add(expbench_store, AddParams(source=source, cache_dir=tmp_path / "c"))
    assert restored.action == "added" and repository_for(expbench_store, task).path == first.entry.path


def test_a_clone_of_a_bare_repository_pins_head_and_a_new_commit_replaces_the_pin(store, upstream, tmp_path):
    first = upstream.commit({"train.py": "print(1)\n", "README.md": "r\n"})
    cache = tmp_path / "cache"
    added = add(store, AddParams(source=f"file://{upstream.bare}", cache_dir=cache))
    assert (added.action, added.entry.commit, added.entry.commit_from) == ("added", first, "head")
    assert added.entry.url == f"file://{upstream.bare.parent}/upstream" and added.entry.source_kind == "git"
    assert (added.entry.path / "train.py").read_text() == "print(1)\n" and not (added.entry.path / ".git").exists()
    by_path = add(store, AddParams(source=str(upstream.bare), cache_dir=cache))
    assert by_path.action == "unchanged"
    second = upstream.commit({"train.py": "print(2)\n"})
    replaced = add(store, AddParams(source=str(upstream.bare), cache_dir=cache))
    assert (replaced.action, replaced.replaced_commit, replaced.entry.commit) == ("replaced", first, second)
    assert not added.entry.path.exists() and (replaced.entry.path / "train.py").read_text() == "print(2)\n"
    assert [e.commit for e in list_repositories(store)] == [second]
    pinned_back = add(store, AddParams(source=str(upstream.bare), commit=first[:10], cache_dir=cache))
    assert (pinned_back.entry.commit, pinned_back.entry.commit_from) == (first, "given")


def test_a_checkout_stands_for_its_origin_and_caches_its_head(store, upstream, tmp_path):
    head = upstream.commit({"a.py": "a\n"})
    (upstream.work / "uncommitted.py").write_text("not in the pin\n")
    result = add(store, AddParams(source=str(upstream.work), cache_dir=tmp_path / "cache"))
    assert result.entry.source_kind == "checkout" and result.entry.commit == head
    assert result.entry.url == f"file://{upstream.bare.parent}/upstream"
    assert (result.entry.path / "a.py").exists() and not (result.entry.path / "uncommitted.py").exists()
    assert any("uncommitted" in note for note in result.notes)


def test_a_repository_without_url_serves_the_tasks_bound_to_it(store, tmp_path):
    save_tasks(store, [_task("rexbench-cogs"), _task("rexbench-othello"),
                       _task("bundled", local_path="code")], source="t")
    base = tmp_path / "cogs-base"
    (base / "src").mkdir(parents=True)
    (base / "src" / "train.py").write_text("train()\n")
    (base / "escape").symlink_to("/etc")
    with pytest.raises(NotFoundError, match="rexbench-nope"):
        add(store, AddParams(source=str(base), task_ids=["rexbench-nope"], cache_dir=tmp_path / "c"))
    result = add(store, AddParams(source=str(base), task_ids=["rexbench-cogs"], cache_dir=tmp_path / "c"))
    assert result.entry.url is None and result.entry.commit.startswith("tree-sha256:")
    assert result.entry.task_ids == ["rexbench-cogs"] and result.entry.source_kind == "folder"
    assert not (result.entry.path / "escape").exists() and any("link" in n for n in result.notes)
    cogs = repository_for(store, get_task(store, "rexbench-cogs"))
    assert cogs is not None and (cogs.path / "src" / "train.py").is_file()
    assert repository_for(store, get_task(store, "rexbench-othello")) is None
    assert repository_for(store, get_task(store, "bundled")) is None
    (base / "src" / "train.py").write_text("train(better=True)\n")
    moved = add(store, AddParams(source=str(base), task_ids=["rexbench-cogs"], cache_dir=tmp_path / "c"))
    assert moved.entry.commit != result.entry.commit
    assert [e.id for e in list_repositories(store)] == [moved.entry.id] and not result.entry.path.exists()


def test_a_checkout_bound_to_a_task_with_a_bundled_copy_replaces_it(store, tmp_path):
    """`repos add PATH --task ID` for a bundled task (AutoExperiment's) takes effect; a URL alone does not."""
    save_tasks(store, [_task("bundled", url="https://github.com/o/r", local_path="code")], source="t")
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("by url\n")
    add(store, AddParams(source=str(other), url="https://github.com/o/r", cache_dir=tmp_path / "c"))
    assert repository_for(store, get_task(store, "bundled")) is None
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "a.py").write_text("with data\n")
    result = add(store, AddParams(source=str(mine), url="file:///mine", task_ids=["bundled"],
                                  cache_dir=tmp_path / "c"))
    assert any("replaces the bundled copy" in note for note in result.notes)
    used = repository_for(store, get_task(store, "bundled"))
    assert used is not None and (used.path / "a.py").read_text() == "with data\n"


def test_a_task_naming_a_commit_gets_only_that_pin(store, upstream, tmp_path):
    first = upstream.commit({"a.py": "1\n"})
    second = upstream.commit({"a.py": "2\n"})
    add(store, AddParams(source=str(upstream.bare), cache_dir=tmp_path / "c"))
    url = f"file://{upstream.bare}"
    assert repository_for(store, _task("t", url=url, commit=second[:8])).commit == second
    assert repository_for(store, _task("t", url=url, commit=first)) is None
    assert repository_for(store, _task("t", url=url)).commit == second


def test_fetch_clones_what_tasks_name_goes_on_after_a_failure_and_keeps_local_urls_off(store, upstream, tmp_path):
    head = upstream.commit({"run.py": "print('ok')\n"})
    save_tasks(store, [_task("a", url=f"file://{upstream.bare}"), _task("b", url=str(upstream.bare)),
                       _task("broken", url=f"file://{tmp_path}/missing.git"), _task("no-url")], source="t")
    cache = tmp_path / "cache"
    refused = fetch(store, FetchParams(cache_dir=cache))
    assert {o.status for o in refused.outcomes} == {"failed"}
    assert all("on this machine" in o.reason for o in refused.outcomes)
    seen = []
    result = fetch(store, FetchParams(cache_dir=cache, allow_local=True), on_result=seen.append)
    by_url = {o.url: o for o in result.outcomes}
    assert seen == result.outcomes and len(result.outcomes) == 2
    ok = by_url[f"file://{upstream.bare.parent}/upstream"]
    assert (ok.status, ok.commit, sorted(ok.task_ids)) == ("ok", head, ["a", "b"])
    failed = by_url[f"file://{tmp_path}/missing"]
    assert failed.status == "failed" and "does not appear to be a git repository" in failed.reason
    assert result.without_repository == ["no-url"]
    assert repository_for(store, get_task(store, "a")).commit == head
    again = fetch(store, FetchParams(task_ids=["a"], cache_dir=cache, allow_local=True))
    assert [o.status for o in again.outcomes] == ["cached"]
    runs = store.query("SELECT status, rows FROM stage_runs WHERE stage = 'repos.fetch' ORDER BY started_at")
    assert [(s, json.loads(r)) for s, r in runs] == [("ok", {"repositories": 0}), ("ok", {"repositories": 1}),
                                                    ("ok", {"repositories": 0})]
    with pytest.raises(NotFoundError):
        fetch(store, FetchParams(task_ids=["nope"], cache_dir=cache))


def test_an_invalid_source_or_commit_is_an_input_error(store, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="not a tarball"):
        add(store, AddParams(source=str(tmp_path / "notes.txt"), url="github.com/a/b"))
    with pytest.raises(InputError, match="no such file"):
        add(store, AddParams(source="./does-not-exist", url="github.com/a/b"))
    with pytest.raises(InputError, match="not a repository URL"):
        add(store, AddParams(source="ext::sh -c id", url="github.com/a/b"))
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(InputError) as err:
        add(store, AddParams(source=str(folder), url="github.com/a/b", commit="--upload-pack=x"))
    assert err.value.field == "commit"


def test_a_repository_with_a_missing_store_table_is_none(tmp_path, iclr2024_task):
    from failatlas.core.store import Store

    empty = Store(tmp_path / "old.duckdb")
    with empty.write() as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    assert repository_for(empty, iclr2024_task) is None


@pytest.fixture
def iclr2024_task(shared_data: Path) -> TaskSpec:
    from failatlas.bench_core.tasks import TASK_IMPORTERS

    return TASK_IMPORTERS.load(shared_data / "expbench" / "iclr2024" / "18439.json", "expbench").records[0]


def test_imported_tasks_keep_their_repository_after_a_reimport(expbench_store, repos_data, tmp_path, shared_data):
    add(expbench_store, AddParams(source=str(repos_data / "apple__ml-calibration.tar.gz"), cache_dir=tmp_path / "c"))
    import_tasks(expbench_store, TaskImportParams(paths=[shared_data / "expbench" / "iclr2024" / "18439.json"]))
    task = get_task(expbench_store, list_tasks(expbench_store, paper="18439")[0]["id"])
    assert repository_for(expbench_store, task).commit == README_COMMITS["apple__ml-calibration.tar.gz"]
