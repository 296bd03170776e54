"""Bounded capture of a command's output stream: keep the head and the tail, count what was dropped."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


class CappedBuffer:
    """Accepts any number of bytes and keeps at most `limit`: the first half and the last half.

    Memory stays O(limit) however much the command prints, so a 100 GB print cannot exhaust the harness.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(0, int(limit))
        self._head_cap = self.limit - self.limit // 2
        self._tail_cap = self.limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or self._tail_cap == 0:
            return
        if len(data) >= self._tail_cap:
            self._tail = bytearray(data[-self._tail_cap:])
        else:
            self._tail += data
            excess = len(self._tail) - self._tail_cap
            if excess > 0:
                del self._tail[:excess]

    @property
    def dropped(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def head(self) -> bytes:
        """The first bytes kept (all of them when nothing was dropped)."""
        return bytes(self._head) if self.truncated else bytes(self._head + self._tail)

    def text(self) -> str:
        """The kept bytes as text; a marker says how many bytes were dropped in between."""
        head = bytes(self._head).decode("utf-8", errors="replace")
        tail = bytes(self._tail).decode("utf-8", errors="replace")
        if self.truncated:
            return f"{head}\n[... {self.dropped} bytes truncated ...]\n{tail}"
        return head + tail


def command_text(cmd: str | Sequence[str]) -> str:
    """The command as one line for results and traces."""
    return cmd if isinstance(cmd, str) else shlex.join(list(cmd))


def command_argv(cmd: str | Sequence[str], shell: Sequence[str]) -> list[str]:
    """argv to execute: a string runs through `shell`, a list runs as is."""
    if isinstance(cmd, str):
        return [*shell, cmd]
    argv = list(cmd)
    if not argv:
        raise ValueError("empty command")
    return argv
