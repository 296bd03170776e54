"""Issue 15, agent outputs and copy-out, attacked in real Docker sandboxes: output files that are folders, FIFOs or
link loops are the agent's failure (scored and counted, never retried as infrastructure); link chains never
escape the copied-out tree; sparse and huge files are cut before they are read, with the cut recorded; output
files are read as the agent's user without following links, so nothing root-only is stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from failatlas.bench_core.agents.base import Budget
from failatlas.bench_core.runs.execute import RunConfig
from failatlas.bench_core.runs.model import RunRecord
from failatlas.bench_core.runs.runner import plan, run_batch
from failatlas.bench_core.runs.writes import write_run
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
from failatlas.bench_core.scoring import ScoreParams
from failatlas.bench_core.scoring import run as score
from failatlas.bench_core.scoring.metrics import run_scores
from failatlas.bench_core.scoring.report import report_table
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.store import open_store

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASK = "mini-ridge-cv"
# small caps, so that a test needs only sparse files and a few MB of real data to cross them
CAPS = {"output_file_bytes": 64 * 1024,
        "copy_limits": {"max_file_bytes": 1024 * 1024, "max_total_bytes": 8 * 1024 * 1024, "deadline_s": 120}}


@pytest.fixture(scope="module")
def mini_task():
    return next(t for t in load_suite("failatlas-mini") if t.id == TASK)


def _config(root: Path, image: str, **extra) -> RunConfig:
    return RunConfig(runs_dir=root / "runs", image=image, budget=Budget(command_timeout_s=60), memory_mb=512,
                     pids_limit=64, **{**CAPS, **extra})


def _run_commands(store, task, commands: dict[str, str], config: RunConfig) -> dict[str, dict]:
    """Run the command agent once per command (one batch); stored runs by the commands' names."""
    work = []
    for command in commands.values():
        todo = plan(store, [task], "command", agent_params={"command": command}).todo
        work += todo
    run_batch(store, work, config)
    rows = {}
    for name, command in commands.items():
        [row] = store.query_dicts("SELECT * FROM runs WHERE agent_params = ?",
                                  [json.dumps({"command": command}, sort_keys=True)])
        rows[name] = row | {"outputs": json.loads(row["outputs"])}
    return rows


def _cut(outputs: dict) -> str:
    return "\n".join(outputs.get("cut") or [])


# -- item 2: an output that is not a file is the agent's failure ---------------------------------------------------

NOT_A_FILE = {
    "good": "echo 'Ridge wins: alpha = 10' > .failatlas/conclusion.md",
    "folder": "mkdir -p .failatlas/conclusion.md/inside",
    "fifo": "mkfifo .failatlas/conclusion.md",
    "loop": "ln -s loop.md .failatlas/conclusion.md && ln -s conclusion.md .failatlas/loop.md",
    "design-and-script": "mkdir .failatlas/design.json && ln -s run.sh .failatlas/run.sh"
                         " && echo 'Ridge wins' > .failatlas/conclusion.md",
}


def test_an_output_that_is_not_a_file_is_the_agents_failure(sandbox_image, mini_task, tmp_path, table):
    store = open_store(tmp_path / "outputs.duckdb")
    save_tasks(store, [mini_task], source="failatlas-mini")
    before = store.query("SELECT count(*) FROM runs")[0][0]
    runs = _run_commands(store, mini_task, NOT_A_FILE, _config(tmp_path, sandbox_image))
    statuses = {name: row["status"] for name, row in runs.items()}
    assert statuses == {"good": "completed", "folder": "agent_error", "fifo": "agent_error",
                        "loop": "agent_error", "design-and-script": "agent_error"}, \
        {n: (r["status"], r["infra_error"]) for n, r in runs.items()}
    errors = {name: runs[name]["outputs"]["agent_error"] for name in NOT_A_FILE if name != "good"}
    assert "conclusion.md" in errors["folder"] and "folder" in errors["folder"]
    assert "conclusion.md" in errors["fifo"] and "FIFO" in errors["fifo"]
    assert "conclusion.md" in errors["loop"] and "symlink" in errors["loop"]
    assert "design.json" in errors["design-and-script"] and "run.sh" in errors["design-and-script"]
    assert runs["design-and-script"]["outputs"]["conclusion"] == "Ridge wins\n"  # the other outputs still count

    planned = plan(store, [mini_task], "command", agent_params={"command": NOT_A_FILE["folder"]}, retry_infra=True)
    assert planned.todo == [] and planned.skipped == 1
    score(store, ScoreParams(runs_dir=tmp_path / "runs", sandbox="docker", image=sandbox_image, llm=False))
    [report] = report_table(store, by="agent").iter_rows(named=True)
    assert report["runs"] == 5
    scores = {r["run_id"]: r for r in run_scores(store).iter_rows(named=True)}
    for name in ("folder", "fifo", "loop"):
        assert scores[runs[name]["id"]]["C"] == 0, name
    assert scores[runs["design-and-script"]["id"]]["D"] == 0
    after = store.query("SELECT count(*) FROM runs")[0][0]
    table.record("attack-output-not-a-file",
                 "conclusion.md a folder, a FIFO, a link loop; design.json a folder and run.sh a self-link: "
                 "4 of 5 runs agent_error naming the file, conclusion/design judged failing (C=0, D=0); "
                 "the report counts all 5 runs; --retry-infra plans 0 of them", before=before, after=after)


# -- item 5: link chains that escape only once every link exists ---------------------------------------------------

CHAINS = (
    # the chain: k is extracted before n exists, so a per-link check in archive order passes it
    "mkdir -p a/b/c && ln -s n/../../../../../etc/passwd a/b/c/k && ln -s ../../../.. a/b/c/n"
    " && ln -s n/../../../../../root a/b/c/kroot",
    # a chain of hops, each harmless alone, and links named so that the archive holds them in any order
    "mkdir -p d && ln -s ../d d/self && ln -s self/self/self/.. d/hop1 && ln -s hop1/.. d/0esc"
    " && ln -s 0esc/etc/hostname d/zz",
    # a link into a folder that is itself a link that leaves; absolute links; links that stay inside
    "mkdir -p e/f && ln -s .. e/f/up && ln -s up/../../.. e/f/gone && ln -s /etc e/abs && ln -s /workspace/README.md"
    " e/abs2 && ln -s ../../README.md e/f/ok && ln -s f/ok e/ok2 && ln -s f e/fdir",
    # links that leave and come back in by a folder's name: the harness's staging folder, the copy's, the sandbox's
    "ln -s ../top/README.md again1 && ln -s ../final/README.md again2 && ln -s ../workspace/README.md again3",
)


def _escaping_links(root: Path) -> list[str]:
    top = os.path.realpath(root)
    bad = []
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            if path.is_symlink():
                target = os.path.realpath(path)
                if os.path.commonpath([top, target]) != top:
                    bad.append(f"{path.relative_to(root)} -> {target}")
    return sorted(bad)


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_link_chains_do_not_escape_the_copied_tree(backend, sandbox_image, tmp_path, table):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# toy\n")
    spec = SandboxSpec(image=sandbox_image, memory_mb=512, pids_limit=64, run_id="test-attack-chains")
    with create_sandbox(backend, spec, workspace=repo) as box:
        for chain in CHAINS:
            made = box.exec(chain, timeout=30, cwd=box.workdir)
            assert made.returncode == 0, made.stderr
        report = box.copy_out(box.workdir, tmp_path / "final")
    final = tmp_path / "final"
    assert _escaping_links(final) == []
    links = sorted(str(p.relative_to(final)) for p in final.rglob("*") if p.is_symlink())
    gone = ["a/b/c/k", "a/b/c/kroot", "a/b/c/n", "d/0esc", "d/zz", "e/f/gone", "e/abs", "e/abs2", "again1", "again2",
            "again3"]
    assert not set(gone) & set(links)
    assert sorted(c.path for c in report.cut) == sorted(gone)  # each reported
    assert (final / "e" / "f" / "ok").read_text() == "# toy\n"
    assert (final / "e" / "ok2").read_text() == "# toy\n"
    assert {"d/self", "e/f/ok", "e/ok2", "e/fdir"} <= set(links)
    assert len(links) == 6
    if backend == "docker":
        table.record("attack-symlink-chain",
                     f"3 chains (the issue's k/kroot via n, a 4-hop chain, links through a leaving folder link), "
                     "2 absolute links and 3 links that leave and re-enter by a folder's name, docker and local: "
                     f"0 of the {len(links)} links kept resolve outside the copy; 11 leaving links dropped and "
                     "reported; links inside kept")


# -- item 6: sparse and huge files ---------------------------------------------------------------------------------

HUGE_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from failatlas.bench_core.runs.execute import RunConfig, execute_run
from failatlas.bench_core.runs.model import RunRequest
from failatlas.bench_core.suites import load_suite

def own_peak_kb():  # VmHWM: this process's own peak (ru_maxrss starts at the parent's, kept across exec on Linux)
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])

# a harness that pulled the huge files into memory or onto disk would hit these limits and fail, not the machine
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
args = json.loads(sys.argv[1])
task = next(t for t in load_suite("failatlas-mini") if t.id == args["task"])
request = RunRequest(task_id=task.id, agent="command", agent_params={"command": args["command"]})
started = time.monotonic()
record = execute_run(request, task, RunConfig.model_validate(args["config"]))
seconds = time.monotonic() - started
print(json.dumps({"record": record.model_dump(mode="json"), "seconds": seconds,
                  "maxrss_mb": own_peak_kb() / 1024,
                  "children_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _du_mb(path: Path) -> float:
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*")) / 1e6


def _huge_run(tmp_path: Path, image: str, command: str, task) -> dict:
    config = _config(tmp_path, image).model_dump(mode="json")
    proc = subprocess.run([sys.executable, "-c", HUGE_CHILD, json.dumps({"task": task.id, "command": command,
                                                                          "config": config})],
                          capture_output=True, text=True, timeout=540, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    got["disk_mb"] = _du_mb(tmp_path / "runs")
    return got


HUGE = {
    # 300 MB sparse conclusion and workspace file: survivable by the old harness, so this case shows it failing
    "moderate": "truncate -s 300M .failatlas/conclusion.md && truncate -s 400M big.bin"
                " && head -c 3000000 /dev/urandom > mid.bin && echo kept > small.txt",
    # the sizes: 3 GB sparse conclusion, 8 GB sparse workspace file, 2 GB sparse design, a repository file
    # replaced by a 5 GB sparse one (diffed as the masked version, so it does not show as deleted)
    "issue": "truncate -s 3G .failatlas/conclusion.md && truncate -s 8G data.bin"
             " && truncate -s 2G .failatlas/design.json && truncate -s 5G data.py && echo kept > small.txt",
    # more real bytes than the total cap: the copy stops, which leaves an incomplete tree, so the run is the agent's
    # failure (with what was kept and why recorded), never an infrastructure error
    "total": "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do head -c 900000 /dev/urandom > part$i.bin; done"
             " && truncate -s 3G .failatlas/conclusion.md && echo kept > small.txt",
}


@pytest.mark.parametrize("case", list(HUGE))
def test_sparse_and_huge_files_are_cut_before_reading_and_recorded(case, sandbox_image, mini_task, tmp_path, table):
    store = open_store(tmp_path / "huge.duckdb")
    got = _huge_run(tmp_path, sandbox_image, HUGE[case], mini_task)
    record = RunRecord.model_validate(got["record"])
    before = store.query("SELECT count(*) FROM runs")[0][0]
    write_run(store, record)
    after = store.query("SELECT count(*) FROM runs")[0][0]
    outputs = record.outputs.model_dump()
    expected = "agent_error" if case == "total" else "completed"
    assert record.status == expected, (record.status, record.infra_error, record.agent_error)
    cut = _cut(outputs)
    assert ".failatlas/conclusion.md" in cut
    assert len(outputs["conclusion"]) == CAPS["output_file_bytes"]
    final = tmp_path / "runs" / record.request.run_id / "final"
    if case == "moderate":
        assert "big.bin (419430400 bytes)" in cut and "mid.bin (3000000 bytes)" in cut
        assert not (final / "big.bin").exists() and not (final / "mid.bin").exists()
        assert (final / "small.txt").read_text() == "kept\n"
        assert "small.txt" in record.outputs.changed_files
    elif case == "issue":
        assert "data.bin (8589934592 bytes)" in cut and "data.py (5368709120 bytes)" in cut
        assert "conclusion.md (3221225472 bytes)" in cut and ".failatlas/design.json" in cut
        assert not (final / "data.bin").exists()
        assert "masked version" in cut and "data.py" not in record.outputs.changed_files
        assert (final / "small.txt").read_text() == "kept\n"
        assert record.outputs.design_error and record.outputs.design is None
    else:
        kept = sorted(p.name for p in final.glob("part*.bin"))
        assert 0 < len(kept) < 12  # the 8 MiB total cap stopped the copy part-way, and said where
        assert "copy stopped: the total cap of 8388608 bytes was reached" in cut
        assert "the working copy was not copied out whole: the total cap" in record.agent_error
    assert got["maxrss_mb"] < 600 and got["children_maxrss_mb"] < 300, got
    assert got["disk_mb"] < 60 and got["seconds"] < 120, got
    stored = json.loads(store.query("SELECT outputs FROM runs")[0][0])
    assert stored["cut"] == record.outputs.cut  # what was cut is on the stored run
    notes = [s.content for s in record.steps if s.kind == "note" and "harness cut" in (s.content or "")]
    assert notes and ".failatlas/conclusion.md" in notes[0]  # and in its trace
    if case == "issue":
        table.record("attack-huge-files",
                     f"3 GB sparse conclusion, 2 GB sparse design, 8 GB sparse data file, a repository file "
                     f"replaced by a 5 GB sparse one: completed in {got['seconds']:.0f} s, harness peak "
                     f"{got['maxrss_mb']:.0f} MB (git {got['children_maxrss_mb']:.0f} MB), {got['disk_mb']:.1f} MB "
                     f"on disk, {len(record.outputs.cut)} cuts recorded on the run and in its trace; conclusion "
                     "kept to its cap; past the 8 MiB total cap (12 x 0.9 MB real files) the copy stops and the "
                     "run is agent_error, not infra_error", before=before, after=after)


# -- item 7: output files read as the agent's user, links not followed ---------------------------------------------

AS_ROOT = {
    "direct": "ln -sf /etc/shadow .failatlas/conclusion.md",
    "through-folder": "mkdir -p /tmp/x && ln -s /etc/shadow /tmp/x/conclusion.md && ln -s /etc/shadow /tmp/x/run.sh"
                      " && rm -rf .failatlas && ln -s /tmp/x .failatlas",
    "design": "ln -s /etc/shadow .failatlas/design.json && echo 'my answer' > .failatlas/conclusion.md",
    # the validator's re-run writes the results file as a link to /etc/shadow: the masked `fit` does it (the code the
    # re-run runs, on the constructed tree) and ends the process
    "results": "sed -i 's|raise NotImplementedError(.*is masked: implement it.*)|"
               "import os; os.symlink(\"/etc/shadow\", \"results.json\"); os._exit(0)|' ridge.py"
               " && echo 'my answer' > .failatlas/conclusion.md",
}


def test_outputs_are_read_as_the_agent_without_following_links(sandbox_image, mini_task, tmp_path, table):
    store = open_store(tmp_path / "root.duckdb")
    save_tasks(store, [mini_task], source="failatlas-mini")
    shadow = subprocess.run(["docker", "run", "--rm", "--user", "0", sandbox_image, "head", "-n", "1", "/etc/shadow"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert shadow.startswith("root:")
    before = store.query("SELECT count(*) FROM runs")[0][0]
    runs = _run_commands(store, mini_task, AS_ROOT, _config(tmp_path, sandbox_image))
    score(store, ScoreParams(run_ids=[runs["results"]["id"]], runs_dir=tmp_path / "runs", sandbox="docker",
                             image=sandbox_image, llm=False))
    tables = ("runs", "run_steps", "sandbox_commands", "validations", "judgements", "monitor_findings")
    everything = json.dumps([store.query(f'SELECT * FROM "{t}"') for t in tables], default=str)
    assert shadow not in everything and "root:*:" not in everything
    for name, row in runs.items():
        if name == "results":
            continue
        assert row["status"] == "agent_error", (name, row["status"], row["infra_error"])
        assert "symlink" in row["outputs"]["agent_error"], row["outputs"]["agent_error"]
    assert runs["design"]["outputs"]["conclusion"] == "my answer\n"
    assert runs["design"]["outputs"]["design_raw"] is None
    [(outcome, detail)] = store.query("SELECT outcome, detail FROM validations")
    assert outcome == "runtime_error" and "results.json is not a readable file" in detail and "symlink" in detail
    after = store.query("SELECT count(*) FROM runs")[0][0]
    table.record("attack-read-as-root",
                 "conclusion.md, design.json and run.sh as links to /etc/shadow, directly and through a linked "
                 ".failatlas folder: 3 of 3 runs agent_error ('... is a symlink'); a re-run whose results.json is a "
                 "link to /etc/shadow: validation runtime_error, scoring carries on; the shadow line appears in no "
                 "stored run, step, command, validation or judgement", before=before, after=after)
