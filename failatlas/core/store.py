"""The DuckDB store: one file holds every table; each stage reads tables and writes tables.

This module knows no stage: `failatlas.store` assembles every package's migrations and opens a store with them.

Concurrency rule (DuckDB allows one read-write process, or many read-only ones, never both at once):
connections are short-lived. A writer opens the file, writes one batch in one transaction and closes it;
a reader opens it read-only, copies what it needs out and closes it. Both wait, with backoff, while the other
kind holds the file. A long command may keep its connection open between transactions (`Store.kept()`), and
gives it up as soon as another process announces that it waits. Parallel workers never open the file: they hand
their rows to the one process that writes (the runner's parent, Ray's driver). So a benchmark can write while the
app reads, neither failing. See docs/STORE.md.
"""

from __future__ import annotations

import enum
import fcntl
import hashlib
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from failatlas.core.errors import StoreError, StoreLockedError

DEFAULT_DB = "failatlas.duckdb"
DB_ENV_VAR = "FAILATLAS_DB"

@dataclass(frozen=True)
class Migration:
    """One versioned, append-only step of a package's schema. Never edit one that has shipped: add another."""

    package: str
    version: int
    name: str
    sql: str

    @property
    def id(self) -> str:
        return f"{self.package}:{self.version:03d}_{self.name}"

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.strip().encode()).hexdigest()[:16]


def resolve_db_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The store's path: the argument, else $FAILATLAS_DB, else ./failatlas.duckdb."""
    return Path(path or os.environ.get(DB_ENV_VAR) or DEFAULT_DB)


def _is_lock_conflict(exc: Exception) -> bool:
    text = str(exc).lower()
    if "different configuration" in text:  # another thread of this process holds the file in the other mode
        return True
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


def _interrupted(exc: BaseException) -> bool:
    """Whether DuckDB stopped a query for Ctrl-C (it raises `InterruptException`, or `RuntimeError: Query
    interrupted`, both Exceptions a per-item handler would swallow)."""
    return isinstance(exc, duckdb.InterruptException) or str(exc).startswith("Query interrupted")


class Taken(enum.Enum):
    """What `_ProcessLock.try_acquire` got: the lock, or a wait for this process's own reads or another process."""

    YES = "yes"
    OWN_READS = "own reads"
    OTHERS = "another process"


class _ProcessLock:
    """This process's advisory lock on a store (`flock` of the file `<store>.lock`): shared while it only reads,
    exclusive while it writes, held from a connection's opening to its closing. DuckDB locks the file itself, yet
    with DuckDB 2.0.1 three writer processes taking turns lost a committed row in about one run of six
    (tests/failatlas/test_store.py; none in 12 runs with this lock). The threads of one process share it as they
    share DuckDB's instance: a read joins whatever the process holds; a write joins a write, and waits while the
    process's own reads hold it shared. Where the lock file cannot be made (a read-only folder), only DuckDB's own
    lock remains."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.exclusive = False
        self.holders = 0
        self.mutex = threading.Lock()

    def try_acquire(self, exclusive: bool) -> Taken:
        """Join or take the lock, or say who holds it."""
        with self.mutex:
            if self.holders and (self.exclusive or not exclusive):
                self.holders += 1
                return Taken.YES
            if self.holders:  # this process reads; a write waits for its reads to end
                return Taken.OWN_READS
            if self.fd is None:
                try:
                    self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
                except OSError:  # a read-only folder, or a link in its place (never followed)
                    self.fd = -1
            if self.fd >= 0:
                try:
                    fcntl.flock(self.fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                except BlockingIOError:
                    return Taken.OTHERS
            self.exclusive, self.holders = exclusive, 1
            return Taken.YES

    def release(self) -> None:
        with self.mutex:
            self.holders -= 1
            if self.holders == 0 and self.fd is not None and self.fd >= 0:
                fcntl.flock(self.fd, fcntl.LOCK_UN)


_LOCKS: dict[str, _ProcessLock] = {}
_LOCKS_MUTEX = threading.Lock()


def _real(path: Path) -> str:
    """The store's file as every process names it, whatever link or relative path led there: the name its lock,
    its `.wait` file and this process's keeper go by."""
    return os.path.realpath(path)


def _process_lock(path: Path) -> _ProcessLock:
    key = _real(path) + ".lock"
    with _LOCKS_MUTEX:
        found = _LOCKS.get(key)
        if found is None:
            found = _LOCKS[key] = _ProcessLock(key)
        return found


def _open_flag(path: str, *, create: bool = True) -> int:
    """A descriptor of the file `path` for `flock` (-1 where it cannot be opened: a read-only folder, or a link in
    its place, never followed). Without `create`, one the process may only read will do (a shared lock needs no
    more): a reader of another user, or of a read-only folder, can still say that it waits."""
    flags = os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(path, flags | os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        if create:
            return -1
    try:
        return os.open(path, flags | os.O_RDONLY)
    except OSError:
        return -1


class _Waiting:
    """This process says, while it waits for a store another process holds, that it waits: a shared `flock` of
    `<store>.wait`, held until its connection opens or it gives up. A process that keeps its connection open
    (`_Keeper`) gives the file up as soon as it sees one."""

    def __init__(self, path: Path) -> None:
        self.path = _real(path) + ".wait"
        self.fd: int | None = None

    def announce(self) -> None:
        if self.fd is not None:
            return
        self.fd = _open_flag(self.path, create=False)
        if self.fd >= 0:
            try:  # a keeper's look (a moment's exclusive lock) may be under way: then at the next try
                fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                self.end()

    def end(self) -> None:
        if self.fd is not None and self.fd >= 0:
            os.close(self.fd)  # the lock goes with the descriptor
        self.fd = None


class _Keeper:
    """One read-write connection a process keeps open between its transactions while a long command works on the
    store (`Store.kept()`): each transaction then joins DuckDB's open instance instead of opening the file, reading
    its catalog and writing a checkpoint on close (about 19 ms of CPU each on the demo's store). It is opened with a
    write (which holds the process's lock exclusively) and counts as one more holder of that lock. It is closed,
    and the file given to others, when another process announces that it waits (`_Waiting`; checked every
    `POLL_S` by a watcher thread), when no transaction used it for `IDLE_S`, and when the last `kept()` ends.
    Where the `.wait` file cannot be made, nothing is kept."""

    POLL_S = 0.05
    IDLE_S = 2.0

    def __init__(self, real: str) -> None:
        self.path = real  # absolute, links resolved: a later chdir changes nothing
        self.flag_path = real + ".wait"
        self.lock = _process_lock(Path(real))
        self.users = 0
        self.conn: duckdb.DuckDBPyConnection | None = None
        self.flag = -1
        self.last_used = 0.0
        self.mutex = threading.Lock()
        self.watcher: threading.Thread | None = None
        self.stop = threading.Event()

    def enter(self) -> None:
        with self.mutex:
            self.users += 1
            if self.users == 1:
                self.flag = _open_flag(self.flag_path)

    def leave(self) -> None:
        with self.mutex:
            self.users -= 1
            if self.users:
                return
            watcher, self.watcher = self.watcher, None
            self.stop.set()
            try:
                self._close()
            finally:
                if self.flag >= 0:
                    os.close(self.flag)
                self.flag = -1
        if watcher is not None:
            watcher.join()

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def others_wait(self) -> bool:
        try:
            fcntl.flock(self.flag, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.flag, fcntl.LOCK_UN)
        return False

    def keep(self) -> None:
        """Called by a write that holds the process's lock exclusively, its connection open: keep one more
        connection open past it, unless one is kept already or another process waits."""
        with self.mutex:
            if not self.users or self.conn is not None or self.flag < 0 or self.others_wait():
                return
            if self.lock.try_acquire(exclusive=True) is not Taken.YES:  # joins the write's exclusive hold
                return
            try:
                self.conn = duckdb.connect(self.path)
            except BaseException:
                self.lock.release()
                raise
            self.touch()
            if self.watcher is None:
                self.stop = threading.Event()
                self.watcher = threading.Thread(target=self._watch, args=(self.stop,), daemon=True,
                                                name="failatlas-store-keeper")
                self.watcher.start()

    def _close(self) -> None:  # with self.mutex held
        if self.conn is None:
            return
        try:
            self.conn.close()
        finally:
            self.conn = None
            self.lock.release()

    def _watch(self, stop: threading.Event) -> None:
        while not stop.wait(self.POLL_S):
            with self.mutex:
                if self.conn is not None and (time.monotonic() - self.last_used > self.IDLE_S or self.others_wait()):
                    self._close()


_KEEPERS: dict[str, _Keeper] = {}  # only stores a `kept()` ever entered
_INHERITED: list = []  # what a forked child got of its parent's open stores (`_after_fork`)
_FORKED_OPEN: set[str] = set()  # the stores a forked child refuses (their real paths)


def _keeper(path: Path, *, make: bool = False) -> _Keeper | None:
    """This process's keeper of the store at `path` (made with `make`; None when it never kept it)."""
    key = _real(path)
    found = _KEEPERS.get(key)
    if found is None and make:
        found = _Keeper(key)
        with _LOCKS_MUTEX:
            found = _KEEPERS.setdefault(key, found)
    return found


def _after_fork() -> None:
    """In a child forked while this process held a store (a kept connection, a transaction of another thread):
    the child owns neither the parent's DuckDB instance nor its locks. The inherited connections are kept
    referenced and never closed (a close would checkpoint the parent's file from a copy), and the store is refused
    in the child (`_connect`): a connection there would join the copied instance, and what it wrote would be
    lost."""
    for key, keeper in list(_KEEPERS.items()):
        if keeper.conn is not None:
            _INHERITED.append(keeper.conn)
            _FORKED_OPEN.add(key)
        _KEEPERS.pop(key)
    for key, lock in list(_LOCKS.items()):
        if lock.holders:
            _FORKED_OPEN.add(key[: -len(".lock")])
        _LOCKS.pop(key)  # the child takes locks of its own (its descriptors are the parent's, shared with it)
    global _LOCKS_MUTEX
    _LOCKS_MUTEX = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


class Store:
    """A handle on one DuckDB file. Cheap to create; holds no connection between calls (outside `kept()`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 120.0) -> None:
        self.path = resolve_db_path(path)
        self.lock_timeout = lock_timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- connections -------------------------------------------------------------------------------------------
    def _wait(self, deadline: float, delay: float, cause: BaseException | None = None) -> float:
        """Wait a jittered `delay` before the next try to open the file (the next delay, doubled up to 0.5 s);
        StoreLockedError past `deadline`."""
        if time.monotonic() >= deadline:
            raise StoreLockedError(
                f"store {self.path} stayed locked by another connection for {self.lock_timeout:.0f} s",
                hint="wait for the other FailAtlas command to finish, or raise --lock-timeout",
            ) from cause
        time.sleep(delay * (0.5 + random.random()))
        return min(delay * 2, 0.5)

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        if read_only and not self.path.exists():
            raise StoreError(
                f"no store at {self.path}",
                hint="create it with a command that writes (for example `failatlas tasks import-mini`) "
                "or point --db / $FAILATLAS_DB at an existing file",
            )
        if not read_only and self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if _FORKED_OPEN and _real(self.path) in _FORKED_OPEN:
            raise StoreError(f"store {self.path} was open in the process this one was forked from",
                             hint="open the store in a process started afresh (multiprocessing's spawn), not forked")
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.01
        lock = _process_lock(self.path)
        waiting = _Waiting(self.path)  # another process that keeps the file open gives it up when it sees this
        try:
            while True:
                taken = lock.try_acquire(exclusive=not read_only)
                if taken is not Taken.YES:
                    if taken is Taken.OTHERS:
                        waiting.announce()
                    delay = self._wait(deadline, delay)
                    continue
                try:
                    try:
                        conn = duckdb.connect(str(self.path), read_only=read_only)
                    except BaseException:
                        lock.release()  # held only with a connection
                        raise
                except (duckdb.ConnectionException, duckdb.IOException) as exc:
                    # Another thread of this process holds the file read-write: a reader shares that database
                    # instance. Any other conflict (another process's lock, a reader thread in the other mode)
                    # waits.
                    if (read_only and isinstance(exc, duckdb.ConnectionException)
                            and "different configuration" in str(exc)):
                        read_only = False
                        continue
                    if not _is_lock_conflict(exc):
                        raise StoreError(f"cannot open store {self.path}: {exc}") from exc
                    waiting.announce()
                    delay = self._wait(deadline, delay, exc)
                    continue
                except duckdb.Error as exc:
                    raise StoreError(f"cannot open store {self.path}: {exc}") from exc
                keeper = _keeper(self.path) if not read_only else None
                if keeper is not None:
                    try:
                        keeper.keep()
                    except BaseException:  # the write never gets its connection: give it back here
                        try:
                            conn.close()
                        finally:
                            lock.release()
                        raise
                return conn
        finally:
            waiting.end()

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One all-or-nothing write: a transaction that commits on success and rolls back on any error.

        Re-entrant within a thread: a nested `write()` joins the outer transaction.
        """
        outer = getattr(self._local, "conn", None)
        if outer is not None:
            yield outer
            return
        conn = self._connect(read_only=False)
        self._local.conn = conn
        try:
            conn.execute("BEGIN TRANSACTION")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except (duckdb.InterruptException, RuntimeError) as exc:
            if not _interrupted(exc):
                raise
            raise KeyboardInterrupt from exc  # Ctrl-C during a query, which DuckDB reports as an Exception
        finally:
            self._local.conn = None
            try:
                conn.close()
            finally:
                _process_lock(self.path).release()
                if keeper := _keeper(self.path):
                    keeper.touch()

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection, closed on exit. Copy results out before leaving the block."""
        outer = getattr(self._local, "conn", None)
        if outer is not None:
            yield outer
            return
        conn = self._connect(read_only=True)
        try:
            yield conn
        except (duckdb.InterruptException, RuntimeError) as exc:
            if not _interrupted(exc):
                raise
            raise KeyboardInterrupt from exc  # Ctrl-C during a query: never an error a handler could swallow
        finally:
            try:
                conn.close()
            finally:
                _process_lock(self.path).release()
                if keeper := _keeper(self.path):
                    keeper.touch()

    @contextmanager
    def kept(self) -> Iterator[None]:
        """While inside, this process keeps a connection open between its transactions (`_Keeper`), for a command
        that makes many short ones (a batch of runs, of scores; the demo). Another process that wants the file waits
        at most until the transaction under way ends. Nests."""
        keeper = _keeper(self.path, make=True)
        keeper.enter()
        try:
            yield
        finally:
            keeper.leave()

    # -- conveniences ------------------------------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Run a read query and return all rows."""
        with self.read() as conn:
            return conn.execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: list[Any] | tuple[Any, ...] | None = None) -> list[dict[str, Any]]:
        """Run a read query and return rows as dicts keyed by column name."""
        with self.read() as conn:
            cur = conn.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def query_polars(self, sql: str, params: list[Any] | tuple[Any, ...] | None = None):  # noqa: ANN201
        """Run a read query and return a polars DataFrame."""
        import polars as pl

        with self.read() as conn:
            return pl.from_arrow(conn.sql(sql, params=params or None).to_arrow_table())

    # -- schema ------------------------------------------------------------------------------------------------
    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Create or upgrade the store with `migrations` (every package's, in order: `failatlas.store`
        assembles them); returns the ids of the migrations applied now."""
        applied_now: list[str] = []
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " seq INTEGER NOT NULL, id VARCHAR PRIMARY KEY, package VARCHAR NOT NULL, version INTEGER NOT NULL,"
                " checksum VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
            )
            done = dict(conn.execute("SELECT id, checksum FROM schema_migrations").fetchall())
            for migration in migrations:
                if migration.id in done:
                    if done[migration.id] != migration.checksum:
                        raise StoreError(
                            f"migration {migration.id} changed after it was applied to {self.path}",
                            hint="shipped migrations are append-only: add a new migration instead",
                        )
                    continue
                try:
                    conn.execute(migration.sql)
                except duckdb.Error as exc:
                    raise StoreError(f"migration {migration.id} failed on {self.path}: {exc}") from exc
                conn.execute(
                    "INSERT INTO schema_migrations (seq, id, package, version, checksum)"
                    " SELECT coalesce(max(seq), 0) + 1, ?, ?, ?, ? FROM schema_migrations",
                    [migration.id, migration.package, migration.version, migration.checksum],
                )
                applied_now.append(migration.id)
        return applied_now

    def applied_migrations(self) -> list[str]:
        """Ids of migrations already in the store (empty when the file does not exist yet)."""
        if not self.path.exists():
            return []
        with self.read() as conn:
            has = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
            ).fetchone()[0]
            if not has:
                return []
            return [r[0] for r in conn.execute("SELECT id FROM schema_migrations ORDER BY seq").fetchall()]

    def tables(self) -> list[str]:
        """Names of base tables and views in the store."""
        with self.read() as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

