"""The SQL writes of `bench_core.repos`: recording a pin and the tasks bound to it (the `repositories` table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from failatlas.bench_core.repos.cache import CacheEntry

_INSERT = ("INSERT INTO repositories (id, url, commit, commit_from, path, source, source_kind, task_ids, added_at,"
           " stage_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def save_entry(conn: Any, entry: CacheEntry) -> list[Path]:
    """Record `entry` on `conn` (inside the caller's transaction), replacing the row with its id.

    Its tasks are bound to it alone: they leave every other row, and a row without a URL left with no task is
    deleted. Tasks bound to the row it replaces stay bound. Returns the folders no row uses any more (the
    replaced pin's, the deleted rows'), for the caller to remove once the transaction has committed."""
    rows = conn.execute("SELECT id, url, path, task_ids FROM repositories").fetchall()
    previous = next((r for r in rows if r[0] == entry.id), None)
    bound = list(dict.fromkeys([*(previous[3] if previous else []), *entry.task_ids]))
    released: list[str] = []
    for row_id, url, path, task_ids in rows:
        if row_id == entry.id:
            continue
        kept = [t for t in task_ids if t not in entry.task_ids]
        if kept == list(task_ids):
            continue
        if url is None and not kept:
            conn.execute("DELETE FROM repositories WHERE id = ?", [row_id])
            released.append(path)
        else:
            conn.execute("UPDATE repositories SET task_ids = ? WHERE id = ?", [kept, row_id])
    if previous is not None:
        conn.execute("DELETE FROM repositories WHERE id = ?", [entry.id])
        released.append(previous[2])
    conn.execute(_INSERT, [entry.id, entry.url, entry.commit, entry.commit_from, str(entry.path), entry.source,
                           entry.source_kind, bound, entry.added_at, entry.stage_run_id])
    still_used = {r[0] for r in conn.execute("SELECT path FROM repositories").fetchall()}
    return [Path(p) for p in dict.fromkeys(released) if p not in still_used]
