"""Hostile inputs (issue 15, items 4 and 9): task files whose paths reach host files, and imports built to exhaust
memory or the stack.

A task file may only name paths inside its own folder (its repository) and inside the repository (results file,
masked files): anything else is an InputError naming the file and field, nothing is imported, and no host file
is read, copied or deleted, on import or later when a workspace is prepared or a run re-validated. An import
built to exhaust memory (zip bomb, one huge line, one huge insight) or the stack (JSON nested 100k deep) is a
one-line InputError naming file and line, nothing is written, and memory stays bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from failatlas.bench_core.prepare import prepare_workspace, run_hidden_tests
from failatlas.bench_core.suites import load_task, suite_dir
from failatlas.bench_core.tasks import TaskImportParams, get_task, save_tasks
from failatlas.bench_core.tasks import run as import_tasks
from failatlas.core.errors import InputError
from failatlas.ingest import FileIngestParams, run_file
from failatlas.store import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROWS = FIXTURES / "autoexperiment" / "mlrc_n_k.jsonl"
SUITE_TASK = "imbalance-reweight"  # names a repository, a base-version overlay and hidden tests
MIB = 1 << 20
DEEP = 100_000


@pytest.fixture
def store(tmp_path: Path):
    return open_store(tmp_path / "store.duckdb")


def _count(store, table: str) -> int:
    return store.query(f"SELECT count(*) FROM {table}")[0][0]


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """Host files a task must never reach: a file to delete and a folder holding a root-only key."""
    folder = tmp_path / "host"
    (folder / "keys").mkdir(parents=True)
    (folder / "victim.txt").write_text("a host file that must survive\n")
    key = folder / "keys" / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- host-secret-key-material\n")
    key.chmod(0o600)
    return folder


def _intact(host: Path) -> bool:
    return (host / "victim.txt").is_file() and (host / "keys" / "id_ed25519").is_file()


# -- item 4: task files ------------------------------------------------------------------------------------
def _rexbench(root: Path, **meta) -> Path:
    folder = root / "tasks" / "hostile"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "run.py").write_text("print('hello')\n")
    (folder / "instructions.md").write_text("## Background\nA base.\n\n## Extension to be implemented\nDo it.\n")
    meta = {"name": "hostile", "eval": {"command": "python3 run.py", "results_file": "results.json"},
            "repository": {"local_path": "repo"}, **meta}
    (folder / "task.json").write_text(json.dumps(meta))
    return folder


def _rows(root: Path, **changes) -> Path:
    folder = root / "tasks" / "rows"
    folder.mkdir(parents=True)
    row = json.loads(ROWS.read_text().splitlines()[0])
    for key, value in changes.items():
        if key == "file":
            row["func_details"][0]["file"] = value
        else:
            row[key] = value
    (folder / "rows.jsonl").write_text(json.dumps(row) + "\n")
    return folder / "rows.jsonl"


def _suite_task(root: Path, edit=None) -> Path:
    folder = root / "tasks" / SUITE_TASK
    shutil.copytree(suite_dir("failatlas-mini") / SUITE_TASK, folder)
    if edit is not None:
        task_file = folder / "task.yaml"
        text = task_file.read_text()
        changed = edit(text)
        assert changed != text
        task_file.write_text(changed)
    return folder


def _import_cases(tmp: Path, host: Path):
    """(label, what to import, the file the error must name, the field it must name), one case at a time."""
    victim = host / "victim.txt"

    def rex_results(value: str, link: bool = False):
        def make():
            folder = _rexbench(tmp, eval={"command": "python3 run.py", "results_file": value})
            if link:
                (folder / "repo" / "out").symlink_to(host, target_is_directory=True)
            return folder, folder / "task.json"
        return make

    def rex_repo(value: str, link: bool = False):
        def make():
            folder = _rexbench(tmp, repository={"local_path": value})
            if link:
                (folder / "keys").symlink_to(host / "keys", target_is_directory=True)
            return folder, folder / "task.json"
        return make

    def rows(**changes):
        def make():
            path = _rows(tmp, **changes)
            return path, path
        return make

    def suite(edit):
        def make():
            folder = _suite_task(tmp, edit)
            return folder, folder / "task.yaml"
        return make

    up = os.path.relpath(victim, tmp / "tasks" / "hostile" / "repo")  # '../../../host/victim.txt'
    return [
        ("rexbench results file, absolute", rex_results(str(victim)), "eval.results_file"),
        ("rexbench results file, '..'", rex_results(up), "eval.results_file"),
        ("rexbench results file through a link in the repository", rex_results("out/victim.txt", link=True),
         "eval.results_file"),
        ("rexbench results file, the repository root", rex_results("."), "eval.results_file"),
        ("rexbench repository, absolute host folder", rex_repo(str(host / "keys")), "repository.local_path"),
        ("rexbench repository, '..'", rex_repo("../../host/keys"), "repository.local_path"),
        ("rexbench repository, a link out of the task folder", rex_repo("keys", link=True),
         "repository.local_path"),
        ("autoexperiment repository, absolute", rows(repository={"local_path": str(host / "keys")}),
         "repository.local_path"),
        ("autoexperiment paper id climbing out (its code/ folder)", rows(paper_id="../../host", combined_id=None),
         "paper_id"),
        ("autoexperiment masked file, absolute", rows(file=str(victim)), "func_details[0].file"),
        ("autoexperiment masked file, '..'", rows(file="../../../host/victim.txt"), "func_details[0].file"),
        ("failatlas results file, absolute",
         suite(lambda t: t.replace("results_file: results.json", f"results_file: {victim}")), "run.results_file"),
        ("failatlas results file, '..'",
         suite(lambda t: t.replace("results_file: results.json", "results_file: ../../../host/victim.txt")),
         "run.results_file"),
        ("failatlas masked function in a file outside the repository",
         suite(lambda t: t.replace("  overlay: base", "  overlay: base\n  functions:\n"
                                   "    - {path: ../../host/victim.py, qualname: f}")),
         "masking.functions"),
    ]


def test_task_file_paths_that_leave_their_folder_are_refused_on_import(tmp_path: Path, host: Path, table):
    cases = _import_cases(tmp_path, host)
    refused = []
    for label, make, field in cases:
        store = open_store(tmp_path / "store.duckdb")
        target, named = make()
        with pytest.raises(InputError) as err:
            import_tasks(store, TaskImportParams(paths=[target]))
        message = str(err.value)
        assert "\n" not in message, (label, message)
        assert str(named) in message or str(named.resolve()) in message, (label, message)
        assert f"field '{field}" in message, (label, message)
        assert _count(store, "tasks") == 0, label
        assert _intact(host), label
        refused.append(field)
        shutil.rmtree(tmp_path / "tasks")
        (tmp_path / "store.duckdb").unlink()
    prepared = _prepare_refusals(tmp_path / "prepare", host)
    table.record("attack-task-paths",
                 f"{len(refused)} hostile task files refused on import, each naming file and field "
                 f"({', '.join(sorted(set(refused)))}), 0 tasks written; {prepared} hostile specs that skipped "
                 "import (an older store, built in code) refused by prepare and the hidden-test runner; the host "
                 "file and key untouched",
                 before=0, after=0)


def _prepare_refusals(tmp: Path, host: Path) -> int:
    """Specs that escaped import (an older store, a spec built in code) are refused where paths are used."""
    tmp.mkdir()
    victim = host / "victim.txt"
    n = 0
    for value in (str(victim), os.path.relpath(victim, tmp / "ws")):
        task = load_task(_suite_task(tmp / f"r{n}") / "task.yaml")
        task.run.results_file = value  # not validated on assignment: as a spec read from an older store
        with pytest.raises(InputError, match="results_file"):
            prepare_workspace(task, tmp / "ws")
        assert _intact(host) and not (tmp / "ws").exists()
        n += 1
    task = load_task(_suite_task(tmp / "repo") / "task.yaml")
    task.repository.local_path = str(host / "keys")
    with pytest.raises(InputError, match="local_path"):
        prepare_workspace(task, tmp / "ws")
    assert not (tmp / "ws").exists()
    task = load_task(_suite_task(tmp / "hidden") / "task.yaml")
    task.implementation.hidden_tests = [str(victim)]
    with pytest.raises(InputError, match="hidden_tests"):
        run_hidden_tests(task, Path(task.repository.local_path))
    return n + 2


def test_an_overlay_file_that_links_to_a_host_file_never_reaches_the_workspace(tmp_path: Path, host: Path):
    folder = _suite_task(tmp_path)
    (folder / "base" / "notes.txt").symlink_to(host / "keys" / "id_ed25519")
    task = load_task(folder / "task.yaml")
    with pytest.raises(InputError, match="masking.overlay"):
        prepare_workspace(task, tmp_path / "ws")
    leaked = [p for p in (tmp_path / "ws").rglob("*") if p.is_file() and "host-secret" in p.read_text("latin-1")]
    assert leaked == []


def test_a_link_inside_a_hidden_tests_folder_that_leads_out_is_refused(tmp_path: Path, host: Path):
    from failatlas.bench_core.prepare.hidden_tests import hidden_test_paths

    folder = _suite_task(tmp_path, lambda text: text.replace(
        "hidden_tests: [hidden_tests/test_hidden_imbalance_reweight.py]", "hidden_tests: [hidden_tests]"))
    task = load_task(folder / "task.yaml")
    assert [p.name for p in hidden_test_paths(task)] == ["test_hidden_imbalance_reweight.py"]
    (folder / "hidden_tests" / "test_zz_key.py").symlink_to(host / "keys" / "id_ed25519")
    with pytest.raises(InputError, match="implementation.hidden_tests") as err:
        hidden_test_paths(task)  # the folder is globbed when judged: the link is checked then, never read
    assert "\n" not in str(err.value)


def test_a_spec_stored_before_paths_were_checked_is_refused_when_read(store, tmp_path: Path, host: Path):
    task = load_task(_suite_task(tmp_path) / "task.yaml")
    task.run.results_file = str(host / "victim.txt")
    save_tasks(store, [task])
    with pytest.raises(InputError, match="run.results_file") as err:
        get_task(store, task.id)
    assert "\n" not in str(err.value)


def _symlink_diff(workspace: Path, name: str, target: Path) -> str:
    """The git diff that adds `name` as a link to `target` in a copy of `workspace`."""
    work = workspace.parent / "diff-work"
    shutil.copytree(workspace, work, symlinks=True)
    (work / name).symlink_to(target, target_is_directory=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    diff = subprocess.run([*git, "diff", "--cached", "--binary"], cwd=work, check=True, capture_output=True,
                          text=True).stdout
    shutil.rmtree(work)
    return diff


def test_an_agent_link_cannot_make_the_validator_delete_a_host_file(tmp_path: Path, host: Path):
    """The results file lives in a folder; the agent's diff turns that folder into a link to the host."""
    from failatlas.bench_core.scoring.checks.execution import validate
    from failatlas.bench_core.scoring.evidence.rerun import patched_workspace

    folder = _suite_task(tmp_path, lambda t: t.replace("results_file: results.json",
                                                       "results_file: out/victim.txt"))
    task = load_task(folder / "task.yaml")
    ws = Path(prepare_workspace(task, tmp_path / "agent").path)
    diff = _symlink_diff(ws, "out", host)
    clean, error = patched_workspace(task, diff, scratch=tmp_path / "scratch")
    assert error is None and (clean / "out").is_symlink()
    with contextlib.suppress(PermissionError):  # the sandbox refusing to read through the agent's link: its rule
        validate(task, {"diff": diff, "changed_files": ["out"]}, workspace=clean, patch_error=error,
                 sandbox_backend="local", spec_fields={"workdir": "/workspace"})
    assert _intact(host)


# -- item 9: bounded imports -------------------------------------------------------------------------------
_PEAK = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from failatlas.core.errors import InputError
    from failatlas.store import open_store
    kind, db, path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    store = open_store(db)
    if kind == "insights":
        from failatlas.ingest import FileIngestParams, run_file
        call, table = (lambda: run_file(store, FileIngestParams(paths=[path]))), "insight_sources"
    else:
        from failatlas.bench_core.tasks import TaskImportParams, run
        call, table = (lambda: run(store, TaskImportParams(paths=[path]))), "tasks"
    # VmHWM: this process's own peak; ru_maxrss would start at the parent's peak (kept across exec on Linux)
    before = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
    try:
        call()
        error = None
    except InputError as exc:
        error = str(exc)
    after = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
    rows = store.query(f"SELECT count(*) FROM {table}")[0][0]
    print(json.dumps({"grown_mb": round((after - before) / 1024), "error": error, "rows": rows}))
""")


def _peak(kind: str, path: Path, tmp: Path) -> dict:
    """Import `path` in a fresh process; how far its peak memory grew (MB), the error, rows written."""
    proc = subprocess.run([sys.executable, "-c", _PEAK, kind, str(tmp / f"peak-{path.name}.duckdb"), str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _eval_header() -> dict:
    return {"version": 2, "status": "success",
            "eval": {"task": "bomb", "model": "m", "run_id": "r1", "eval_id": "e1", "solver": "s"}}


def _deflate_bomb(path: Path, size: int) -> Path:
    """A .eval archive whose one sample decompresses to `size` bytes (about 1 MB per GiB on disk)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(_eval_header()))
        with archive.open("samples/1_epoch_1.json", "w", force_zip64=True) as member:
            member.write(b'{"id": 1, "scores": {"s": {"value": "I", "explanation": "')
            block = b" " * MIB
            for _ in range(size // MIB):
                member.write(block)
            member.write(b'"}}}')
    return path


def _zstd_stream(size: int) -> bytes:
    """`size` bytes of a sample's JSON, zstandard-compressed without holding them in memory."""
    import zstandard

    compressor = zstandard.ZstdCompressor().compressobj()
    out = [compressor.compress(b'{"id": 1, "scores": {"s": {"value": "I", "explanation": "')]
    block = b" " * MIB
    out.extend(compressor.compress(block) for _ in range(size // MIB))
    out.append(compressor.compress(b'"}}}'))
    out.append(compressor.flush())
    return b"".join(out)


def _one_line_naming(message: str | None, path: Path, line: int | None = None) -> None:
    assert message is not None, "the import was accepted"
    assert "\n" not in message, message
    assert str(path.resolve()) in message or str(path) in message, message
    if line is not None:
        assert f"{path.name}:{line}" in message, message


def test_a_zstd_member_larger_than_it_declares_is_cut_while_streaming(tmp_path: Path):
    """Inspect writes zstandard members; a forged one declares 100 bytes and holds 1 GiB."""
    bomb = _zstd_forged_sample(tmp_path / "forged.eval", _zstd_stream(1 << 30), declared=100)
    outcome = _peak("insights", bomb, tmp_path)
    _one_line_naming(outcome["error"], bomb)
    assert outcome["rows"] == 0 and outcome["grown_mb"] < 300, outcome


def _zstd_forged_sample(path: Path, compressed: bytes, *, declared: int) -> Path:
    """`path` rewritten: a zstandard header and one zstandard sample whose compressed bytes are given."""
    import zstandard

    header = json.dumps(_eval_header()).encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("header.json", zstandard.ZstdCompressor().compress(header))
        archive.writestr("samples/1_epoch_1.json", compressed)
    sizes = {"header.json": len(header), "samples/1_epoch_1.json": declared}
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    for info in infos:
        struct.pack_into("<H", data, info.header_offset + 8, 93)
        struct.pack_into("<I", data, info.header_offset + 22, sizes[info.filename])
    at = data.find(b"PK\x01\x02")
    while at != -1:
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, at + 28)
        name = bytes(data[at + 46: at + 46 + name_len]).decode()
        struct.pack_into("<H", data, at + 10, 93)
        struct.pack_into("<I", data, at + 24, sizes[name])
        at = data.find(b"PK\x01\x02", at + 46 + name_len + extra_len + comment_len)
    path.write_bytes(bytes(data))
    return path


def test_an_archive_of_many_members_each_under_the_cap_is_refused_past_the_total(tmp_path, store, monkeypatch):
    monkeypatch.setattr("failatlas.ingest.importers.inspect_log.MAX_MEMBER_BYTES", MIB)
    monkeypatch.setattr("failatlas.ingest.importers.inspect_log.MAX_ARCHIVE_BYTES", 3 * MIB)
    bomb = tmp_path / "many.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(_eval_header()))
        for n in range(5):
            sample = {"id": n, "scores": {"s": {"value": "I", "explanation": "The run failed. " + " " * 900_000}}}
            archive.writestr(f"samples/{n}_epoch_1.json", json.dumps(sample))
    with pytest.raises(InputError, match="decompress") as err:
        run_file(store, FileIngestParams(paths=[bomb]))
    _one_line_naming(str(err.value), bomb)
    assert _count(store, "insight_sources") == 0


def _long_line_files(tmp: Path, line: str) -> dict[str, tuple[Path, str]]:
    """One file per JSON-lines reader, its second line `line`: path and the kind of import."""
    tmp.mkdir(exist_ok=True)
    good = {
        "jsonl": json.dumps({"text": "The model diverged after the learning rate was raised.", "phase": "execution"}),
        "trail": json.dumps({"trace_id": "t1", "error_idx": 0, "category": "Goal Deviation",
                             "description": "The agent answered a different question."}),
        "expbench": json.dumps({"design_error_analysis": "The design omits the baseline."}),
        "autoexperiment": ROWS.read_text().splitlines()[0],
    }
    files = {}
    for name, first in good.items():
        path = tmp / (f"trail_errors_{name}.jsonl" if name == "trail" else f"{name}.jsonl")
        path.write_text(first + "\n" + line + "\n")
        files[name] = (path, "tasks" if name == "autoexperiment" else "insights")
    return files


def _import(store, kind: str, path: Path, fmt: str = "auto"):
    if kind == "tasks":
        return import_tasks(store, TaskImportParams(paths=[path], format=fmt))
    return run_file(store, FileIngestParams(paths=[path], format=fmt))


def test_a_line_over_the_cap_is_refused_while_reading(tmp_path: Path, store, monkeypatch):
    monkeypatch.setattr("failatlas.core.importers.MAX_LINE_BYTES", 64 * 1024)
    line = json.dumps({"text": "word " * 200_000, "phase": "design"})  # 1 MB: over the lowered cap
    for name, (path, kind) in _long_line_files(tmp_path / "lines", line).items():
        fmt = name if kind == "insights" else "autoexperiment"
        with pytest.raises(InputError, match="longer than") as err:
            _import(store, kind, path, fmt)
        _one_line_naming(str(err.value), path, line=2)
    assert _count(store, "insight_sources") == 0 and _count(store, "tasks") == 0


def test_a_zip_bomb_a_120_mb_line_and_100k_nesting_are_refused_with_bounded_memory(tmp_path: Path, table):
    bomb = _deflate_bomb(tmp_path / "bomb.eval", 1 << 30)  # 1 GiB of sample in about 1 MB
    assert bomb.stat().st_size < 2 * MIB
    zipped = _peak("insights", bomb, tmp_path)
    _one_line_naming(zipped["error"], bomb)
    assert "samples/1_epoch_1.json" in zipped["error"]
    line = tmp_path / "huge.jsonl"
    with line.open("w") as handle:  # 120 MB in one line, written in pieces
        handle.write('{"phase": "design", "text": "')
        for _ in range(120):
            handle.write("the agent wrote a very long insight " * 29_000)
        handle.write('"}\n')
    assert line.stat().st_size > 120 * 10**6
    long = _peak("insights", line, tmp_path)
    line.unlink()
    _one_line_naming(long["error"], line, line=1)
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "The run failed.", "phase": "design", "d": ' + "[" * DEEP + "]" * DEEP + "}\n")
    nested = _peak("insights", deep, tmp_path)
    _one_line_naming(nested["error"], deep, line=1)
    for outcome in (zipped, long, nested):
        assert outcome["rows"] == 0 and outcome["grown_mb"] < 300, outcome
    table.record("attack-import-bombs",
                 f"1 MB .eval bomb (1 GiB sample): refused by member size, peak +{zipped['grown_mb']} MB; 120 MB "
                 f"single line: refused at line 1 while reading, peak +{long['grown_mb']} MB; JSON 100k deep: "
                 f"one-line error at its line, peak +{nested['grown_mb']} MB; 0 rows written (before the fix: +2,046 "
                 "MB and +2,127 MB, both accepted); a forged zstd member, insights, documents and task files over "
                 "their caps, YAML alias bombs: one-line InputError naming file and line (other tests)",
                 before=0, after=zipped["rows"] + long["rows"] + nested["rows"])


def test_a_member_of_many_tiny_values_under_the_byte_cap_is_refused_before_parsing(tmp_path: Path):
    """The red team's shape: 32 MiB of `[],` compress to about 32 kB, stay under every byte cap, and parsed they
    made about 1 GB of Python objects (peak +820 MB before the fix). The values are counted before parsing."""
    bomb = tmp_path / "objects.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(_eval_header()))
        with archive.open("samples/1_epoch_1.json", "w") as member:
            member.write(b"[")
            for _ in range(32):
                member.write(b"[]," * (MIB // 3))
            member.write(b"[]]")
    assert bomb.stat().st_size < MIB
    outcome = _peak("insights", bomb, tmp_path)
    _one_line_naming(outcome["error"], bomb)
    assert "values" in outcome["error"] and "samples/1_epoch_1.json" in outcome["error"]
    assert outcome["rows"] == 0 and outcome["grown_mb"] < 300, outcome


def test_an_insight_over_the_cap_is_refused_naming_file_line_and_field(tmp_path: Path, store):
    long_text = "The agent kept retrying the same failing command " * 500  # 25,000 characters, one sentence
    jsonl = tmp_path / "long.jsonl"
    jsonl.write_text(json.dumps({"text": "Short and fine.", "phase": "design"}) + "\n"
                     + json.dumps({"text": long_text, "phase": "design"}) + "\n")
    csv_file = tmp_path / "long.csv"
    csv_file.write_text(f'text,phase\nShort and fine.,design\n"{long_text}",design\n')
    trail = tmp_path / "trail_errors_long.jsonl"
    trail.write_text(json.dumps({"trace_id": "t1", "error_idx": 0, "category": "Goal Deviation",
                                 "description": long_text}) + "\n")
    for path, line, field in ((jsonl, 2, "text"), (csv_file, 3, "text"), (trail, 1, "description")):
        with pytest.raises(InputError, match="characters") as err:
            run_file(store, FileIngestParams(paths=[path]))
        _one_line_naming(str(err.value), path, line=line)
        assert f"field '{field}'" in str(err.value)
    assert _count(store, "insight_sources") == 0


def test_a_document_over_the_cap_is_refused_before_it_is_read(tmp_path: Path, store, monkeypatch):
    monkeypatch.setattr("failatlas.core.importers.MAX_DOCUMENT_BYTES", MIB)
    insights = tmp_path / "big.json"
    insights.write_text(json.dumps([{"text": f"Insight number {n} is here.", "phase": "design"}
                                    for n in range(40_000)]))
    tasks = tmp_path / "big_complete_final.json"
    tasks.write_text(json.dumps({"questions": [{"question": "q" * 2 * MIB}]}))
    for kind, path in (("insights", insights), ("tasks", tasks)):
        with pytest.raises(InputError, match="larger than") as err:
            _import(store, kind, path)
        _one_line_naming(str(err.value), path)
    assert _count(store, "insight_sources") == 0 and _count(store, "tasks") == 0



def _deep_cases(tmp: Path) -> list[tuple[str, Path, int]]:
    """(kind, file, line of the nesting) for every reader of JSON or YAML, nested DEEP levels."""
    tmp.mkdir()
    nested = "[" * DEEP + "]" * DEEP
    cases = []

    def write(name: str, text: str, kind: str, line: int) -> None:
        path = tmp / name
        if name.endswith("/task.json") or name.endswith("/task.yaml") or "/" in name:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        cases.append((kind, path.parent if name.endswith(("/task.json", "/task.yaml")) else path, line))

    fine = json.dumps({"text": "The run failed.", "phase": "design"})
    write("deep.jsonl", fine + "\n" + json.dumps({"text": "x", "phase": "design"})[:-1] + f', "d": {nested}}}\n',
          "insights", 2)
    write("deep.json", "\n" + nested, "insights", 2)
    write("deep_log.json", '{"eval": {"task": "t"},\n "samples": ' + nested + "}", "insights", 2)
    write("deep.eval", "", "insights", 0)
    with zipfile.ZipFile(tmp / "deep.eval", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(_eval_header()))
        archive.writestr("samples/1_epoch_1.json", '{"id": 1, "scores": ' + nested + "}")
    cases[-1] = ("insights", tmp / "deep.eval", None)
    write("trail_errors_deep.jsonl", '{"trace_id": "t", "error_idx": 0, "category": "x", "d": ' + nested + "}\n",
          "insights", 1)
    write("rows.jsonl", ROWS.read_text().splitlines()[0] + "\n" + nested + "\n", "tasks", 2)
    write("deep_complete_final.json", '{"questions": ' + nested + "}", "tasks", 1)
    write("rex/task.json", '{"eval":\n' + nested + "}", "tasks", 2)
    (tmp / "rex" / "instructions.md").write_text("## Extension to be implemented\nDo it.\n")
    write("suite/task.yaml", "id: deep\nquestion: " + nested + "\n", "tasks", 2)
    return cases


def test_json_and_yaml_nested_100k_deep_give_one_line_errors(tmp_path: Path, store):
    for kind, path, line in _deep_cases(tmp_path / "deep"):
        with pytest.raises(InputError, match="nested") as err:
            _import(store, kind, path)
        named = path / ("task.json" if (path / "task.json").exists() else "task.yaml") if path.is_dir() else path
        _one_line_naming(str(err.value), named, line=line)
    assert _count(store, "insight_sources") == 0 and _count(store, "tasks") == 0


def test_task_nesting_that_parses_but_cannot_be_stored_is_refused(tmp_path: Path, store):
    """300 levels parse (Python stops near 1,000) but the store's JSON writer stops near 255: refused up front,
    whether the nesting is in the file or inside a JSON string field the importer parses."""
    nested = "[" * 300 + "]" * 300
    rex = _rexbench(tmp_path, other=None)
    (rex / "task.json").write_text('{"eval": {"command": "python3 run.py"},\n "other": ' + nested + "}")
    fenced = tmp_path / "p1_complete_final.json"
    fenced.write_text(json.dumps({"questions": [{"question": "Does it work?", "design_complexity": nested}]}))
    for target, named, line in ((rex, rex / "task.json", 2), (fenced, fenced, None)):
        with pytest.raises(InputError, match="nested too deeply|cannot be stored") as err:
            import_tasks(store, TaskImportParams(paths=[target]))
        _one_line_naming(str(err.value), named, line=line)
    assert _count(store, "tasks") == 0


def test_yaml_aliases_that_expand_exponentially_are_refused(tmp_path: Path, store):
    """A 'billion laughs' task.yaml: 8 levels of 10 aliases is 10^8 values once copied to JSON."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    folder = _suite_task(tmp_path)
    task_file = folder / "task.yaml"
    task_file.write_text(task_file.read_text().replace("extra:\n", "extra:\n  laughs:\n" + "".join(
        f"    {line}\n" for line in lines), 1))
    with pytest.raises(InputError, match="expands to more than") as err:
        import_tasks(store, TaskImportParams(paths=[folder]))
    _one_line_naming(str(err.value), task_file)
    assert _count(store, "tasks") == 0


def test_the_line_cap_is_exact_and_ordinary_files_still_read(tmp_path: Path, store, monkeypatch):
    """A line of exactly the cap (newline excluded) is read; one byte more is refused. A BOM and CRLF endings,
    which the bounded reader handles itself, still import."""
    row = json.dumps({"text": "The seed was never fixed.", "phase": "design"})
    exact = tmp_path / "exact.jsonl"
    exact.write_bytes(b"\xef\xbb\xbf" + row.encode() + b"\r\n" + row.replace("seed", "data").encode() + b"\r\n")
    monkeypatch.setattr("failatlas.core.importers.MAX_LINE_BYTES", len(row) + 4)  # the BOM (3) and CR (1) count
    assert run_file(store, FileIngestParams(paths=[exact])).new_occurrences == 2
    monkeypatch.setattr("failatlas.core.importers.MAX_LINE_BYTES", len(row) + 3)
    with pytest.raises(InputError, match="longer than") as err:
        run_file(store, FileIngestParams(paths=[exact]))
    _one_line_naming(str(err.value), exact, line=1)
