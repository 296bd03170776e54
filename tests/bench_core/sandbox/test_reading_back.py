"""Reading an agent's files back, on every backend (Docker through GNU find and tar as the agent's user, Docker
through the daemon's archive for images without them, local): `read_file` reads only regular files, as the
sandbox user, without following links, up to a cap; `copy_out` stays within its `CopyLimits` and reports what it
left out."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import (
    CopyLimits,
    SandboxFileNotFoundError,
    SandboxPathError,
    SandboxSpec,
    create_sandbox,
)

BACKENDS = ["docker", "docker-archive", "local"]


@pytest.fixture(scope="module")
def boxes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """One sandbox per backend, created on first use; each test works in its own folder."""
    made: dict = {}
    repo = tmp_path_factory.mktemp("reading-back") / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# toy\n")

    def get(backend: str):
        if backend not in made:
            if backend.startswith("docker"):
                image = request.getfixturevalue("sandbox_image")
                box = create_sandbox("docker", SandboxSpec(image=image, memory_mb=512, pids_limit=64,
                                                           run_id="test-reading-back"), workspace=repo)
                if backend == "docker-archive":
                    box._gnu_tools = False  # as for an image without GNU find and tar
            else:
                box = create_sandbox("local", SandboxSpec(memory_mb=512), workspace=repo)
            made[backend] = box
        return made[backend]

    yield get
    for box in made.values():
        box.close()


def _sh(box, command: str) -> None:
    result = box.exec(command, timeout=60, cwd=box.workdir)
    assert result.returncode == 0, result.stderr


def _within(seconds: float, call):
    """call() in a thread; fails (instead of hanging the suite) when it blocks, e.g. opening a FIFO."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_read_file_reads_only_regular_files_without_following_links(backend, boxes) -> None:
    box = boxes(backend)
    secret = "/etc/shadow" if backend == "docker" else os.path.realpath(__file__)
    _sh(box, f"mkdir -p r/dir r/real && mkfifo r/fifo && ln -s loop r/loop && ln -s {secret} r/secret"
             " && ln -s real r/via && echo inside > r/real/f && printf 'abcdef' > r/ok && ln -s ok r/rel")
    assert box.read_file("r/ok") == b"abcdef"
    assert box.read_file("r/ok", max_bytes=4) == b"abcd"
    assert box.read_file("r/real/f") == b"inside\n"
    expected = {"dir": "is a folder, not a file", "fifo": "is a FIFO, not a regular file",
                "loop": "is a symlink, not a file", "secret": "is a symlink, not a file",
                "rel": "is a symlink, not a file", "via/f": "is reached through the symlink"}
    for name, words in expected.items():
        with pytest.raises(SandboxPathError, match=words):
            _within(20, lambda name=name: box.read_file(f"r/{name}"))
    for missing in ("r/none", "r/ok/below", "r/none/below"):
        with pytest.raises(SandboxFileNotFoundError):
            box.read_file(missing)


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_read_file_of_a_sparse_giant_reads_only_its_head(backend, boxes) -> None:
    box = boxes(backend)
    _sh(box, "mkdir -p s && truncate -s 3G s/giant")
    started = time.monotonic()
    assert box.read_file("s/giant", max_bytes=1000) == b"\0" * 1000
    assert time.monotonic() - started < 10


@pytest.mark.docker
def test_docker_reads_and_copies_as_the_agent_user(boxes, tmp_path: Path) -> None:
    box = boxes("docker")
    with pytest.raises(SandboxPathError, match="cannot be read by the sandbox user"):
        box.read_file("/etc/shadow")
    report = box.copy_out("/etc/shadow", tmp_path / "shadow")
    assert not (tmp_path / "shadow").exists()
    assert [c.reason for c in report.cut] == ["unreadable by the sandbox user"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_out_applies_the_caps_and_reports_what_it_left_out(backend, boxes, tmp_path: Path) -> None:
    box = boxes(backend)
    _sh(box, "mkdir -p c/d1/d2/d3/d4/d5/d6 && cd c && truncate -s 300M sparse && head -c 600000 /dev/urandom > real"
             " && echo small > small && mkfifo fifo && echo deep > d1/d2/d3/d4/d5/d6/f && echo top > d1/f"
             " && ln small hard && printf '#!/bin/sh\\n' > tool && chmod 4755 tool && chmod 640 small")
    limits = CopyLimits(max_file_bytes=500_000, max_total_bytes=10_000_000, max_depth=5, max_entries=100)
    report = box.copy_out("c", tmp_path / "c", limits=limits)
    got = tmp_path / "c"
    assert sorted(p.name for p in got.iterdir()) == ["d1", "hard", "small", "tool"]
    assert (got / "hard").read_text() == "small\n" and not (got / "hard").is_symlink()
    assert (got / "d1" / "f").read_text() == "top\n" and (got / "d1/d2/d3/d4/d5").is_dir()
    assert not (got / "d1/d2/d3/d4/d5/d6").exists()
    assert stat.S_IMODE((got / "tool").stat().st_mode) == 0o755  # executable kept, set-uid dropped
    cuts = {c.path: (c.reason, c.size) for c in report.cut}
    assert cuts["sparse"] == ("over the per-file cap of 500000 bytes", 300 * 1024 ** 2)
    assert cuts["real"] == ("over the per-file cap of 500000 bytes", 600_000)
    assert cuts["fifo"][0] == "a FIFO, not a regular file"
    assert cuts["d1/d2/d3/d4/d5/d6"][0] == "nested deeper than 5 folders"
    assert not any(p.startswith("d1/d2/d3/d4/d5/d6/") for p in cuts)  # one line for the folder left out
    assert report.stopped is None and report.files == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_out_stops_at_the_total_cap_the_entry_cap_and_the_deadline(backend, boxes, tmp_path: Path) -> None:
    box = boxes(backend)
    _sh(box, "mkdir -p t/many && cd t && for i in 1 2 3 4 5; do head -c 300000 /dev/urandom > f$i; done"
             " && for i in $(seq 1 50); do : > many/e$i; done")
    started = time.monotonic()
    total = box.copy_out("t", tmp_path / "total", limits=CopyLimits(max_total_bytes=1_000_000))
    assert total.stopped == "the total cap of 1000000 bytes was reached at " + next(
        c.path for c in total.cut if c.reason.startswith("over the total cap"))
    assert 0 < len(list((tmp_path / "total").glob("f*"))) < 5 and total.bytes <= 1_000_000
    entries = box.copy_out("t/many", tmp_path / "entries", limits=CopyLimits(max_entries=20))
    assert entries.stopped == "more than 20 entries" and len(list((tmp_path / "entries").iterdir())) <= 19
    late = box.copy_out("t", tmp_path / "late", limits=CopyLimits(deadline_s=0.001))
    assert late.stopped == "the deadline of 0.001 s passed"
    # a stream left unread once the copy stopped held up the daemon's next exec (the kill) for 22 s
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_out_of_a_file_a_missing_path_and_a_link(backend, boxes, tmp_path: Path) -> None:
    box = boxes(backend)
    _sh(box, "mkdir -p f && echo one > f/one && ln -s one f/link")
    assert box.copy_out("f/one", tmp_path / "one").files == 1 and (tmp_path / "one").read_text() == "one\n"
    report = box.copy_out("f/link", tmp_path / "link")
    assert not os.path.lexists(tmp_path / "link") and "the copied path itself is a link" in report.cut[0].reason
    with pytest.raises(SandboxFileNotFoundError):
        box.copy_out("f/none", tmp_path / "none")


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_out_keeps_odd_names(backend, boxes, tmp_path: Path) -> None:
    box = boxes(backend)
    _sh(box, "mkdir -p n && cd n && touch $'new\\nline' $'\\xff-not-utf8' 'sp ace' -- -rf '*' && mkdir -- --x")
    box.copy_out("n", tmp_path / "n")
    assert sorted(os.listdir(os.fsencode(tmp_path / "n"))) == sorted(
        [b"new\nline", b"\xff-not-utf8", b"sp ace", b"-rf", b"*", b"--x"])


def test_a_tree_too_deep_for_the_host_is_cut_not_an_error(boxes, tmp_path: Path) -> None:
    box = boxes("local")
    _sh(box, "mkdir -p deep && cd deep && d=$(printf 'x%.0s' $(seq 1 250)) && for i in $(seq 1 20); do mkdir $d"
             " && cd $d; done && echo bottom > f")
    report = box.copy_out("deep", tmp_path / "deep", limits=CopyLimits(max_depth=30))
    assert [c.reason for c in report.cut] == ["cannot be written on the host: File name too long"]
    assert report.stopped is None and (tmp_path / "deep").is_dir()


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_read_files_answers_each_path_as_read_file_does_in_one_command(backend, boxes, monkeypatch) -> None:
    """`protocol.read_files` (Docker: one command for all, issue 54) gives for each path what `read_file` gives:
    the same bytes up to the cap, or an error of the same class and words; bytes that look like its own frame
    lines, binary data and empty files come back whole."""
    from failatlas.bench_core.sandbox.protocol import read_files

    box = boxes(backend)
    secret = "/etc/shadow" if backend == "docker" else os.path.realpath(__file__)
    _sh(box, f"mkdir -p m/dir m/real && mkfifo m/fifo && ln -s {secret} m/secret && ln -s real m/via"
             " && echo inside > m/real/f && : > m/empty && chmod 0 m/real/f 2>/dev/null; echo inside > m/g"
             " && printf 'a\\n0123456789abcdef0123456789abcdef 0\\nb\\n\\0\\377' > m/frames"
             " && head -c 3000 /dev/urandom > m/bin")
    names = ["g", "frames", "bin", "empty", "dir", "fifo", "secret", "via/f", "real/f", "none", "g/below"]
    if backend == "docker":
        calls = []
        start = type(box)._start_exec
        monkeypatch.setattr(type(box), "_start_exec", lambda self, argv, **kw: (calls.append(argv[0]),
                                                                              start(self, argv, **kw))[1])
    for cap in (1 << 20, 5):
        got = _within(30, lambda cap=cap: read_files(box, [f"m/{n}" for n in names], max_bytes=cap))
        for name, answer in zip(names, got, strict=True):
            try:
                alone = box.read_file(f"m/{name}", max_bytes=cap)
            except (SandboxPathError, SandboxFileNotFoundError) as exc:
                assert type(answer) is type(exc) and str(answer) == str(exc), (name, answer, exc)
            else:
                assert answer == alone, name
        assert got[0] == b"inside\n"[:cap] and got[3] == b""
    if backend == "docker":  # one command per call of read_files, beside the read_file of each path
        assert calls.count("/bin/sh") == 2 + 2 * len(names), calls


def test_reading_back_runs_the_systems_programs_not_ones_the_agent_put_on_its_path(boxes, tmp_path) -> None:
    """The agent's PATH starts with ~/.local/bin, which it owns: a `head`, `find` or `tar` it leaves there must not
    answer for the harness's reads (it would run as the agent's user inside them, and could see their fence)."""
    from failatlas.bench_core.sandbox.protocol import read_files

    box = boxes("docker")
    fake = "#!/bin/sh\\necho FAKE\\nexit 0\\n"
    _sh(box, f"mkdir -p p ~/.local/bin && printf 'real bytes' > p/f && for t in head find tar; do "
             f"printf '{fake}' > ~/.local/bin/$t && chmod +x ~/.local/bin/$t; done")
    assert box.exec("head -c 4 p/f", timeout=30, cwd=box.workdir).stdout.strip() == "FAKE"  # planted, and found
    assert box.read_file("p/f") == b"real bytes"
    assert read_files(box, ["p/f", "p/none"], max_bytes=100)[0] == b"real bytes"
    box.copy_out("p", tmp_path / "p")
    assert (tmp_path / "p" / "f").read_bytes() == b"real bytes"
    _sh(box, "rm -rf ~/.local/bin/head ~/.local/bin/find ~/.local/bin/tar")
