from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time

import duckdb
import pytest

from failatlas.core.errors import StoreError, StoreLockedError
from failatlas.store import Migration, Store, all_migrations, open_store


def test_migrate_creates_every_declared_migration_once(db_path):
    store = Store(db_path)
    first = store.migrate(all_migrations())
    assert first == [m.id for m in all_migrations()]
    assert store.migrate(all_migrations()) == []
    assert store.applied_migrations() == first
    assert {"schema_migrations", "stage_runs", "tasks", "insights"} <= set(store.tables())


def test_edited_migration_is_refused(db_path, monkeypatch):
    store = open_store(db_path)
    import failatlas.core.schema as core_schema

    edited = Migration("failatlas", 1, "stage_runs", core_schema.MIGRATIONS[0].sql + " -- changed")
    monkeypatch.setattr(core_schema, "MIGRATIONS", [edited])
    with pytest.raises(StoreError, match="changed after it was applied"):
        store.migrate(all_migrations())


def test_write_is_all_or_nothing(store):
    with pytest.raises(RuntimeError, match="boom"), store.write() as conn:
        conn.execute("INSERT INTO stage_runs (id, stage, params, code_version, started_at, status)"
                     " VALUES ('a', 's', '{}', 'v', now(), 'ok')")
        raise RuntimeError("boom")
    assert store.query("SELECT count(*) FROM stage_runs") == [(0,)]


def test_read_of_missing_store_names_the_file(tmp_path):
    with pytest.raises(StoreError, match="no store at .*missing.duckdb"), Store(tmp_path / "missing.duckdb").read():
        pass


def _hold_write_lock(path: str, seconds: float, ready) -> None:
    conn = duckdb.connect(path)
    ready.set()
    time.sleep(seconds)
    conn.close()


def _hold_store_write(path: str, seconds: float, ready) -> None:
    with Store(path).write():
        ready.set()
        time.sleep(seconds)


@pytest.mark.parametrize("hold", ["duckdb", "store"])
def test_reader_waits_for_a_writer_and_gives_up_with_a_clear_error(db_path, hold):
    open_store(db_path)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_write_lock if hold == "duckdb" else _hold_store_write,
                         args=(str(db_path), 1.5, ready))
    holder.start()
    ready.wait(30)
    with pytest.raises(StoreLockedError, match="stayed locked"):
        Store(db_path, lock_timeout=0.2).query("SELECT 1")
    assert Store(db_path, lock_timeout=30).query("SELECT 42") == [(42,)]  # waits until the holder leaves
    holder.join()


def _writer(path: str, worker: int, n: int, kept: bool = False) -> None:
    store = Store(path, lock_timeout=60)
    with store.kept() if kept else contextlib.nullcontext():
        for i in range(n):
            with store.write() as conn:
                conn.execute(
                    "INSERT INTO stage_runs (id, stage, params, code_version, started_at, status)"
                    " VALUES (?, 'w', '{}', 'v', now(), 'ok')", [f"{worker}-{i}"]
                )


def _reader(path: str, n: int, out) -> None:
    store = Store(path, lock_timeout=60)
    seen = []
    for _ in range(n):
        seen.append(store.query("SELECT count(*) FROM stage_runs")[0][0])
    out.put(seen)


@pytest.mark.parametrize("kept", [False, True], ids=["short", "kept"])
def test_writers_and_readers_in_parallel_lose_nothing(db_path, kept):
    open_store(db_path)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(db_path), w, 25, kept)) for w in range(3)]
    procs.append(ctx.Process(target=_reader, args=(str(db_path), 40, out)))
    for p in procs:
        p.start()
    seen = out.get(timeout=120)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert seen == sorted(seen)  # a reader only ever sees committed, growing state
    assert Store(db_path).query("SELECT count(*), count(DISTINCT id) FROM stage_runs") == [(75, 75)]


def test_a_thread_can_read_while_another_thread_of_the_process_writes(store):
    import threading

    holding, release = threading.Event(), threading.Event()

    def writer():
        with store.write() as conn:
            conn.execute("INSERT INTO stage_runs (id, stage, params, code_version, started_at, status)"
                         " VALUES ('t', 's', '{}', 'v', now(), 'ok')")
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    holding.wait(10)
    try:
        assert store.query("SELECT count(*) FROM stage_runs WHERE id = 'x'") == [(0,)]
    finally:
        release.set()
        thread.join()
    assert store.query("SELECT count(*) FROM stage_runs") == [(1,)]


def test_the_threads_of_a_process_share_its_lock_as_they_share_duckdbs_instance(db_path):
    import threading

    from failatlas.core.store import _process_lock

    open_store(db_path)
    assert (db_path.parent / (db_path.name + ".lock")).is_file()

    store = Store(db_path, lock_timeout=0.3)
    lock = _process_lock(db_path)
    with store.read():  # this process reads: another thread's write waits, another thread's read joins
        assert lock.holders == 1 and not lock.exclusive
        got: list = []
        thread = threading.Thread(target=lambda: got.append(Store(db_path).query("SELECT 7")))
        thread.start()
        thread.join(10)
        assert got == [[(7,)]]
        tried: list = []
        writer = threading.Thread(target=lambda: tried.append(_try_write(db_path)))
        writer.start()
        writer.join(10)
        assert isinstance(tried[0], StoreLockedError), tried
    assert lock.holders == 0
    with store.write():  # this process writes: a read of another thread joins it
        assert lock.exclusive and Store(db_path).query("SELECT 8") == [(8,)]
    assert lock.holders == 0


def _try_write(db_path) -> BaseException | None:
    try:
        with Store(db_path, lock_timeout=0.3).write():
            return None
    except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
        return exc


def test_a_link_in_place_of_the_lock_file_is_never_followed(tmp_path):
    target = tmp_path / "elsewhere"
    db = tmp_path / "store.duckdb"
    (tmp_path / "store.duckdb.lock").symlink_to(target)
    open_store(db)
    assert Store(db).query("SELECT 1") == [(1,)]  # DuckDB's own lock only
    assert not target.exists()


def _keep_writing(path: str, seconds: float, ready, counts) -> None:
    """Writes a row every 50 ms for `seconds` inside `kept()`: the keeper never idles."""
    store = Store(path, lock_timeout=60)
    n = 0
    with store.kept():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with store.write() as conn:
                conn.execute("INSERT INTO stage_runs (id, stage, params, code_version, started_at, status)"
                             " VALUES (?, 'k', '{}', 'v', now(), 'ok')", [f"k-{n}"])
            n += 1
            if n == 1:
                ready.set()
            time.sleep(0.05)
    counts.put(n)


def test_a_kept_connection_is_reused_and_given_up_at_the_end(db_path):
    from failatlas.core.store import _keeper, _process_lock

    store = open_store(db_path)
    lock, keeper = _process_lock(db_path), _keeper(db_path, make=True)
    with store.kept():
        store.query("SELECT 1")  # a read alone keeps nothing
        assert keeper.conn is None and lock.holders == 0
        with store.write() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        assert keeper.conn is not None and lock.holders == 1 and lock.exclusive  # kept past the write
        kept = keeper.conn
        with store.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        assert keeper.conn is kept and store.query("SELECT count(*) FROM t") == [(1,)]
    assert keeper.conn is None and lock.holders == 0 and keeper.watcher is None
    other = duckdb.connect(str(db_path), read_only=True)  # nothing of this process holds the file now
    assert other.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
    other.close()


def test_a_kept_connection_idles_out(db_path, monkeypatch):
    from failatlas.core.store import _Keeper, _keeper, _process_lock

    monkeypatch.setattr(_Keeper, "IDLE_S", 0.2)
    store = open_store(db_path)
    with store.kept():
        with store.write() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        keeper = _keeper(db_path)
        assert keeper.conn is not None
        deadline = time.monotonic() + 10
        while keeper.conn is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert keeper.conn is None and _process_lock(db_path).holders == 0


@pytest.mark.parametrize("how", ["read", "write"])
def test_another_process_gets_a_kept_file_while_its_keeper_keeps_writing(db_path, how):
    open_store(db_path)
    ctx = mp.get_context("spawn")
    ready, counts = ctx.Event(), ctx.Queue()
    keeper = ctx.Process(target=_keep_writing, args=(str(db_path), 8.0, ready, counts))
    keeper.start()
    assert ready.wait(60)
    other = Store(db_path, lock_timeout=4)  # far below the keeper's 8 s: it must give the file up when asked
    started = time.monotonic()
    if how == "read":
        assert other.query("SELECT count(*) FROM stage_runs WHERE stage = 'k'")[0][0] >= 1
    else:
        with other.write() as conn:
            conn.execute("INSERT INTO stage_runs (id, stage, params, code_version, started_at, status)"
                         " VALUES ('other', 'o', '{}', 'v', now(), 'ok')")
    waited = time.monotonic() - started
    n = counts.get(timeout=60)
    keeper.join(30)
    assert keeper.exitcode == 0 and waited < 4
    assert Store(db_path).query("SELECT count(*) FROM stage_runs WHERE stage = 'k'") == [(n,)]  # none lost


def test_a_store_reached_through_a_link_is_kept_for_every_spelling(tmp_path):
    """The lock, the `.wait` file and the keeper go by the file's real path: a process reaching the store through
    a link announces where the keeper looks."""
    real = tmp_path / "real" / "store.duckdb"
    real.parent.mkdir()
    open_store(real)
    (tmp_path / "link.duckdb").symlink_to(real)
    ctx = mp.get_context("spawn")
    ready, counts = ctx.Event(), ctx.Queue()
    keeper = ctx.Process(target=_keep_writing, args=(str(tmp_path / "link.duckdb"), 6.0, ready, counts))
    keeper.start()
    assert ready.wait(60)
    started = time.monotonic()
    assert Store(real, lock_timeout=4).query("SELECT count(*) FROM stage_runs")[0][0] >= 1
    assert time.monotonic() - started < 4
    counts.get(timeout=60)
    keeper.join(30)
    assert keeper.exitcode == 0 and not (tmp_path / "link.duckdb.lock").exists()


def test_a_keeper_that_fails_gives_back_the_write_and_its_lock(db_path, monkeypatch):
    from failatlas.core import store as store_module

    store = open_store(db_path)

    def broken(_path, *args, **kwargs):
        raise KeyboardInterrupt

    with store.kept():
        monkeypatch.setattr(store_module._Keeper, "keep", lambda self: broken(self))
        with pytest.raises(KeyboardInterrupt), store.write():
            pass
    assert store_module._process_lock(db_path).holders == 0
    other = duckdb.connect(str(db_path), read_only=True)  # nothing of this process holds the file
    other.close()


def test_a_child_forked_while_the_store_is_kept_refuses_it(db_path):
    store = open_store(db_path)
    with store.kept():
        with store.write() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: any use of the store is refused, none is lost
            try:
                Store(db_path).query("SELECT 1")
                os.write(write, b"used")
            except StoreError as exc:
                os.write(write, b"refused" if "forked" in str(exc) else b"other")
            finally:
                os._exit(0)
        os.close(write)
        answer = os.read(read, 100)
        os.waitpid(pid, 0)
        os.close(read)
    assert answer == b"refused"
    assert store.query("SELECT count(*) FROM t") == [(0,)]
