"""Reading a git diff as the agent's collected outputs hold it: which files it touches and the lines it adds, with
git's quoted paths decoded. Shared by the monitor's rules, the cheat check and the literal scans."""

from __future__ import annotations

_ESCAPES = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f", "r": b"\r",
            "v": b"\v"}


def _unquote(quoted: str) -> tuple[str, int]:
    """A C-style quoted path as git writes one with special characters ("a/x\\ny", octal bytes for non-ASCII),
    decoded as `tree_diff` names changed files; and where the quoted part ends."""
    out, i = bytearray(), 1
    while i < len(quoted) and quoted[i] != '"':
        if quoted[i] == "\\" and i + 1 < len(quoted):
            if quoted[i + 1] in "01234567":
                out.append(int(quoted[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out += _ESCAPES.get(quoted[i + 1], quoted[i + 1].encode("utf-8", "surrogatepass"))
            i += 2
            continue
        out += quoted[i].encode("utf-8", "surrogatepass")  # a lone surrogate: replaced below, never raised
        i += 1
    return out.decode("utf-8", errors="replace"), i + 1


def _header_path(rest: str) -> str:
    """The old path of a `diff --git <a> <b>` header, either side plain (`a/x b/x`) or quoted."""
    if rest.startswith('"'):
        path, _ = _unquote(rest)
    else:
        path = rest[: (len(rest) - 1) // 2]
    return path[2:] if path[:2] in ("a/", "b/") else path


def diff_files(diff: str) -> dict[str, str | None]:
    """path -> the lines the diff adds to it, None for a deleted file (our diffs never detect renames)."""
    files: dict[str, str | None] = {}
    path, lines, in_hunk = None, [], False

    def close() -> None:
        if path is not None and files.get(path, "") is not None:
            files[path] = "\n".join(lines)

    for line in diff.splitlines():
        if line.startswith("diff --git "):
            close()
            path, lines, in_hunk = _header_path(line[len("diff --git "):]), [], False
        elif path is None:
            continue
        elif not in_hunk:  # the file's header: modes, `--- a/x`, `+++ b/x`, until its first hunk
            if line.startswith("deleted file mode"):
                files[path] = None
            in_hunk = line.startswith("@@")
        elif line.startswith("+"):  # within hunks every `+` line is content, `+++ b/x` included
            lines.append(line[1:])
    close()
    return files


def diff_added_lines(diff: str) -> dict[str, str | None]:
    """path -> the lines the agent's diff adds to it (joined), None for a deleted file."""
    return diff_files(diff)
