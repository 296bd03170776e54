"""Tracing wraps any backend and its events fit the sandbox_commands table."""

from __future__ import annotations

from pathlib import Path

from failatlas.bench_core.sandbox import SandboxEvent, SandboxSpec, TracedSandbox, create_sandbox


def test_one_event_per_exec_stored_in_sandbox_commands(repo: Path, store) -> None:
    events: list[SandboxEvent] = []
    with TracedSandbox(create_sandbox("local", SandboxSpec(), workspace=repo), events.append,
                       purpose="harness") as box:
        box.exec("echo hi", timeout=10)
        box.exec(["sh", "-c", "exit 2"], timeout=10)
        box.exec("sleep 5", timeout=0.5)
        box.write_file("x.txt", "not traced")
    assert [e.seq for e in events] == [0, 1, 2]
    assert [e.exit_code for e in events[:2]] == [0, 2]
    assert events[0].stdout_tail == "hi\n" and events[0].purpose == "harness"
    assert events[1].command == "sh -c 'exit 2'"
    assert events[2].timed_out and events[2].killed_reason == "timeout"
    rows = [e.to_row("run-1") for e in events]
    with store.write() as conn:
        cols = list(rows[0])
        conn.executemany(
            f"INSERT INTO sandbox_commands ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [[r[c] for c in cols] for r in rows],
        )
    with store.read() as conn:
        got = conn.execute("SELECT seq, exit_code, timed_out, killed_reason FROM sandbox_commands "
                           "ORDER BY seq").fetchall()
    assert got == [(0, 0, False, None), (1, 2, False, None), (2, 137, True, "timeout")]


def test_tails_are_bounded(repo: Path) -> None:
    events: list[SandboxEvent] = []
    box = TracedSandbox(create_sandbox("local", SandboxSpec()), events.append, tail_chars=100)
    with box:
        box.exec("python3 -c \"print('z' * 5000)\"", timeout=10)
    assert len(events[0].stdout_tail) == 100


def test_a_broken_sandbox_is_traced_then_raised() -> None:
    import pytest

    from failatlas.bench_core.sandbox import SandboxError

    events: list[SandboxEvent] = []
    inner = create_sandbox("local", SandboxSpec())
    inner.close()
    with pytest.raises(SandboxError):
        TracedSandbox(inner, events.append).exec("true", timeout=5)
    assert len(events) == 1 and events[0].exit_code is None and events[0].stdout_tail is None
