"""Issue 15, items 8, 10 and 11: the app listens on 127.0.0.1 only and a sandbox with network cannot reach the
host's services; task, run, insight and taxonomy texts are shown as text, never as Markdown or HTML; the
`command` agent's command reaches the shell unchanged, braces and all."""

from __future__ import annotations

import contextlib
import html as html_lib
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from failatlas.bench_core import runs
from failatlas.bench_core.agents import create_agent
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks import save_tasks
from failatlas.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


# --- item 11: the command agent's braces ---------------------------------------------------------------------

BRACES = ("printf '%s\\n' '{\"lr\": 0.1, \"seeds\": [1, 2]}' > cfg.json && cat cfg.json; "
          "echo \"home=${HOME:+set} missing=${NO_SUCH_VAR:-dflt}\"; echo {1..3} {a,b}; "
          "echo 'x y z' | awk '{print $2; n++} END {print \"n=\" n}'; "
          "f() { echo \"in-func $1\"; }; f {}; python3 -c 'print(f\"{2+3}\")'; "
          "head -1 \"$FAILATLAS_PROMPT_FILE\"; printf '%s\\n' \"$FAILATLAS_PROMPT\" | head -1; "
          "mkdir -p .failatlas && echo '{\"done\": true}' > .failatlas/conclusion.md")


@pytest.fixture
def mini(store):
    save_tasks(store, load_suite("failatlas-mini"), source="failatlas-mini")
    return store


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_command_with_braces_reaches_the_shell_unchanged(mini, tmp_path, table, sandbox, request):
    image = request.getfixturevalue("sandbox_image") if sandbox == "docker" else None
    before = mini.query("SELECT count(*) FROM runs")[0][0]
    runs.run(mini, runs.BenchParams(agent="command", agent_params={"command": BRACES}, task_ids=["mini-ridge-cv"],
                                    sandbox=sandbox, runs_dir=tmp_path / "runs", **({"image": image} if image else {})))
    [(status, error, run_id)] = mini.query("SELECT status, json_extract_string(outputs, '$.log'), id FROM runs")
    assert status == "completed" and not error
    [(exit_code, out)] = mini.query("SELECT exit_code, stdout_tail FROM sandbox_commands WHERE run_id = ? "
                                    "AND command = ?", [run_id, BRACES])  # traced exactly as given
    assert exit_code == 0
    assert out.splitlines() == ['{"lr": 0.1, "seeds": [1, 2]}', "home=set missing=dflt", "1 2 3 a b", "y", "n=1",
                                "in-func {}", "5", "# Task mini-ridge-cv", "# Task mini-ridge-cv"]
    after = mini.query("SELECT count(*) FROM runs")[0][0]
    table.record("attack-command-braces", f"JSON, ${{VAR:+}}/${{VAR:-}}, {{1..3}}, {{a,b}}, awk, a shell function "
                 f"and a Python f-string in one command ({sandbox} sandbox): run completed, the command traced "
                 "byte for byte, exit 0, all 9 output lines as bash prints them; the prompt reached it through "
                 "$FAILATLAS_PROMPT_FILE and $FAILATLAS_PROMPT", before=before, after=after)


@pytest.mark.parametrize("command", ["aider --message-file {prompt_file}", "agent --task {prompt}",
                                     "x={prompt_file!r}"])
def test_the_old_placeholders_are_refused_with_their_replacement(command):
    with pytest.raises(ConfigError) as refused:
        create_agent("command", command=command)
    assert "FAILATLAS_PROMPT" in refused.value.one_line()


@pytest.mark.parametrize("command", ["echo ${prompt} ${prompt_file}", "awk '{prompt=1} END {print prompt}'",
                                     "echo {{prompt}}", "jq '{prompt: .q}'", "echo {prompt,x}"])
def test_shell_braces_that_look_alike_are_kept(command):
    assert create_agent("command", command=command).command == command


def test_a_huge_prompt_only_skips_the_prompt_variable(mini, tmp_path):
    """A task text too long for one environment variable (Linux caps one at 128 KiB) must not break the run:
    the file still carries it."""
    from failatlas.bench_core.tasks.catalog import get_task

    task = get_task(mini, "mini-ridge-cv").model_copy(update={"id": "mini-huge", "method": "m " * 100_000})
    save_tasks(mini, [task], source="test")
    command = ("echo \"var=${FAILATLAS_PROMPT:+set}\"; wc -c < \"$FAILATLAS_PROMPT_FILE\"; "
               "mkdir -p .failatlas && echo ok > .failatlas/conclusion.md")
    runs.run(mini, runs.BenchParams(agent="command", agent_params={"command": command}, task_ids=["mini-huge"],
                                    sandbox="local", runs_dir=tmp_path / "runs"))
    [(status, out)] = mini.query("SELECT r.status, c.stdout_tail FROM runs r JOIN sandbox_commands c ON "
                                 "c.run_id = r.id WHERE c.command = ?", [command])
    lines = out.splitlines()
    assert status == "completed" and lines[0] == "var=" and int(lines[1]) > 200_000


# --- item 8: the app's address and the host's services ---------------------------------------------------------

PROBE = """
import socket, sys

def gateway():
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            return socket.inet_ntoa(int(fields[2], 16).to_bytes(4, "little"))

for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    host = gateway() if host == "gateway" else host
    target = f"{host}:{port}"
    try:
        with socket.create_connection((host, int(port)), timeout=3) as s:
            s.sendall(b"GET /from-sandbox HTTP/1.0\\r\\n\\r\\n")
            print(target, "reached", s.recv(12).decode(errors="replace"))
    except OSError as exc:
        print(target, "blocked", type(exc).__name__)
"""


class CountingServer:
    """A real HTTP server on the host bound to 0.0.0.0 that counts the requests it answers, by path."""

    def __init__(self, host: str = "0.0.0.0") -> None:  # noqa: S104 - listening everywhere is the point
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png" if self.path.endswith(".png") else "text/plain")
                self.end_headers()
                self.wfile.write(b"host-secret")

            def log_message(self, *_args: object) -> None:
                pass

        self.hits = hits
        self.httpd = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.port = self.httpd.server_address[1]

    def __enter__(self) -> CountingServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _host_addresses() -> list[str]:
    """Every IPv4 address of this host but loopback (a container's 127.0.0.1 is its own)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines() if " lo " not in f" {line.split()[1]} "]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """The local addresses a TCP socket listens on at `port` (from `ss`)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines()}


@pytest.fixture
def app_server(app_db, tmp_path):
    """`failatlas --db DB app [args]`: a real Streamlit server; yields a starter, stops every one it started."""
    from tests.app.test_e2e import _wait_healthy

    procs: list[subprocess.Popen] = []

    def start(*args: str, attempts: int = 2) -> int:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "FAILATLAS_DB"}
        log = tmp_path / f"app-{port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "failatlas", "--db", str(app_db), "app", "--port",
                                     str(port), *args], cwd=ROOT, env=env, start_new_session=True, stdout=out,
                                    stderr=subprocess.STDOUT)
        procs.append(proc)
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", proc)
        except RuntimeError:  # the free port was taken meanwhile by another process of this shared machine
            if attempts <= 1:
                raise RuntimeError(log.read_text()[-2000:]) from None
            return start(*args, attempts=attempts - 1)
        return port

    yield start
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def app_db(tmp_path):
    from failatlas.store import open_store
    from tests.app.fixture import fill_app_store

    path = tmp_path / "app.duckdb"
    fill_app_store(open_store(path))
    return path


@pytest.mark.slow
def test_the_app_listens_on_loopback_unless_told(app_server):
    port = app_server()
    assert _listening(port) == {"127.0.0.1"}
    for address in _host_addresses():
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, port), timeout=3).close()
    wide = app_server("--address", "0.0.0.0")  # noqa: S104 - asked for explicitly
    assert _listening(wide) & {"0.0.0.0", "*"}
    socket.create_connection((_host_addresses()[0], wide), timeout=3).close()


@pytest.mark.docker
@pytest.mark.slow
def test_a_sandbox_with_network_cannot_reach_the_host(sandbox_image, app_server, table):
    import docker

    from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.network import BRIDGE, COMMENT

    client = docker.from_env()
    assert _listening(app_server()) == {"127.0.0.1"}
    app_port = app_server("--address", "0.0.0.0")  # noqa: S104 - the worst case: the app told to listen everywhere
    with CountingServer() as server:
        # Before: Docker's default bridge, what network-enabled sandboxes used, reaches the host's service.
        before = client.containers.run(sandbox_image, ["python3", "-c", PROBE, f"gateway:{server.port}"],
                                       network_mode="bridge", user="1000:1000", remove=True).decode()
        assert " reached HTTP" in before and server.hits == ["/from-sandbox"], before
        default_gateway = before.split(":", 1)[0]

        with create_sandbox("docker", SandboxSpec(image=sandbox_image, network=True)) as box:
            hosts = ["gateway", *sorted({default_gateway, *_host_addresses()})]
            targets = [f"{h}:{p}" for h in hosts for p in (server.port, app_port)]
            probe = box.exec(["python3", "-c", PROBE, *targets], timeout=120)
            lines = probe.stdout.splitlines()
            assert len(lines) == len(targets) and all(" blocked " in line for line in lines), probe.stdout
            own_gateway = lines[0].split(":", 1)[0]
            assert own_gateway != default_gateway  # its own network, not Docker's default bridge
            assert server.hits == ["/from-sandbox"]  # nothing more arrived
            assert box.exec(["getent", "hosts", "localhost"], timeout=20).returncode == 0

            # A firewall reload drops the rule: the next sandbox puts it back before it starts.
            rule = ["INPUT", "-i", BRIDGE, "-m", "comment", "--comment", COMMENT, "-j", "REJECT"]
            subprocess.run(["iptables", "-w", "5", "-D", *rule], check=True)
        with create_sandbox("docker", SandboxSpec(image=sandbox_image, network=True)) as box:
            assert subprocess.run(["iptables", "-w", "5", "-C", *rule], capture_output=True).returncode == 0
            again = box.exec(["python3", "-c", PROBE, f"gateway:{server.port}"], timeout=60).stdout
            assert " blocked " in again and server.hits == ["/from-sandbox"], again
    table.record("attack-app-network", f"app without --address listens on 127.0.0.1 only; with --address 0.0.0.0 "
                 f"a network-enabled sandbox still gets 'connection refused' for all {len(targets)} host "
                 f"address:port pairs (its gateway {own_gateway}, docker0 {default_gateway}, the host's "
                 f"addresses; a 0.0.0.0 HTTP server and the app); the same probe on Docker's default bridge "
                 f"reached the server (1 request, 0 after the fix); rule re-added after a firewall reload")



# --- item 10: Markdown and HTML in texts the app shows -----------------------------------------------------------

def payloads(port: int) -> dict[str, str]:
    """Markup that, rendered, would fetch from `port`, link somewhere or inject HTML."""
    url = f"http://127.0.0.1:{port}"
    return {
        "image": f"![b]({url}/q.png)",
        "html": f'<img src="{url}/h.png"> <script>fetch("{url}/s")</script>',
        "link": "[link](javascript:alert(1))",
        "reference": f"![r][ref] and [ref]: {url}/r.png",
        "autolink": f"<{url}/auto> www.example.org {url}/bare",
        "streamlit": ":red[red] $x^2$ :material/home: ~~gone~~ **bold** # heading",
    }


def poison(db: Path, port: int) -> dict[str, str]:
    """Put the payloads in every text the app shows from tasks, runs, insights and the taxonomy (the fixture
    store of tests/app); returns what went where."""
    import json

    from failatlas.store import Store

    p = payloads(port)
    texts = {"question": f"Q {p['image']} {p['html']}", "method": f"M {p['link']} {p['reference']}",
             "insight": f"I {p['image']} {p['html']} {p['link']} {p['autolink']}", "type": f"T {p['image']}",
             "definition": f"D {p['html']} {p['streamlit']}", "category": f"C {p['image']} {p['link']}",
             "analysis": f"A {p['image']}\n\n{p['reference']}\n- item {p['html']}", "reason": f"R {p['link']}",
             "detail": f"V {p['image']}", "agent": f"agent {p['image']}", "tool": f"bash {p['image']}",
             "rule": f"rule {p['image']}", "phase": "implementation"}
    store = Store(db)
    with store.write() as conn:
        [(spec,)] = conn.execute("SELECT spec FROM tasks WHERE id = 't1'").fetchall()
        spec = {**json.loads(spec), "question": texts["question"], "method": texts["method"]}
        conn.execute("UPDATE tasks SET spec = ?, question = ? WHERE id = 't1'", [json.dumps(spec), texts["question"]])
        conn.execute("UPDATE insights SET text = ? WHERE id = ?", [texts["insight"], TORCH])
        conn.execute("UPDATE failure_types SET name = ?, definition = ? WHERE id = 'implementation/T01'",
                     [texts["type"], texts["definition"]])
        # a category of implementation's types whatever the labeller grouped (the offline one may form none)
        [(tax,)] = conn.execute("SELECT id FROM taxonomies").fetchall()
        conn.execute("INSERT INTO failure_categories (taxonomy_id, id, phase, name, definition, keywords,"
                     " naming_method) VALUES (?, 'implementation/C1', 'implementation', ?, 'poisoned', '[]',"
                     " 'offline') ON CONFLICT DO UPDATE SET name = excluded.name", [tax, texts["category"]])
        conn.execute("UPDATE failure_types SET category_id = 'implementation/C1' WHERE taxonomy_id = ?"
                     " AND phase = 'implementation'", [tax])
        conn.execute("UPDATE judgements SET error_analysis = ?, reason = ? WHERE run_id = 'r1'",
                     [texts["analysis"], texts["reason"]])
        conn.execute("UPDATE validations SET detail = ? WHERE run_id = 'r1'", [texts["detail"]])
        conn.execute("UPDATE runs SET model = ? WHERE id = 'r1'", [texts["agent"]])
        conn.execute("UPDATE run_steps SET tool = ? WHERE run_id = 'r1' AND kind = 'tool_call'", [texts["tool"]])
        conn.execute("UPDATE monitor_findings SET rule = ?, evidence = ? WHERE run_id = 'r1'",
                     [texts["rule"], texts["insight"]])
    return texts


TORCH = "9821209dc18707a9"  # the fixture's insight behind run r1, of failure type implementation/T01


def _markdown_sources(at) -> tuple[list[str], list[str]]:
    """Every string the app handed to Streamlit's Markdown renderer (element bodies and widget, expander and tab
    labels: Streamlit renders Markdown in labels too), and every st.text body (shown without parsing)."""
    found: list[str] = []
    plain: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if getattr(node, "type", None) == "text":
            plain.append(node.value)
        elif proto is not None:
            for name in ("body", "label"):
                try:
                    value = getattr(proto, name)
                except AttributeError:
                    continue
                if isinstance(value, str) and value:
                    found.append(value)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return found, plain


_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)


def _markup_in(source: str) -> list[str]:
    """What Markdown `source` would render beyond text: images, links, raw HTML, autolinked URLs."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(source)
    found = re.findall(r"<(?:img|a|script|iframe|svg|style|video|audio|source|link)\b[^>]*>", rendered)
    outside_code = _CODE_SPAN.sub("", source)
    found += re.findall(r"(?<![\\])\b(?:https?:/|www\.)\S*", outside_code)  # GFM autolink literals
    found += re.findall(r"(?<!\\):[a-z]+\[|(?<!\\)\$[^$\s]", outside_code)  # Streamlit colours, math
    return found


def _plain(source: str) -> str:
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(source)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", rendered)).replace("\u2060", "").strip()


def _drill_url(taxonomy_id: str) -> dict[str, str]:
    return {"page": "drill", "taxonomy": taxonomy_id, "failure_type": "implementation/T01", "insight": TORCH,
            "run": "r1"}


def test_texts_reach_streamlit_as_escaped_markdown(app_db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from failatlas.store import Store

    texts = poison(app_db, 9)
    taxonomy_id = Store(app_db).query("SELECT id FROM taxonomies")[0][0]
    monkeypatch.setenv("FAILATLAS_DB", str(app_db))
    sources: list[str] = []
    unparsed: list[str] = []
    without_run = {k: v for k, v in _drill_url(taxonomy_id).items() if k != "run"}  # the run has its own view
    for params in (_drill_url(taxonomy_id), without_run, {"page": "taxonomy"}, {"page": "overview"},
                   {"page": "compare"},
                   {"page": "drill", "taxonomy": taxonomy_id, "entry": "missing implementation components"},
                   {"page": "drill", "run": "r1", "insight": texts["insight"]},  # an id from the URL
                   {"page": "drill", "taxonomy": taxonomy_id, "search": texts["insight"]}):  # a search from the URL
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params.update(params)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        markdown, text = _markdown_sources(at)
        sources += markdown
        unparsed += text
    from failatlas.appdata.main import PAGE_STYLE
    from failatlas.appdata.pages.run_view import SECTIONS, run_links

    # our own links, no text: the run view's sections, and its links to its task and its diff against gold
    ours = {"Sections: " + " · ".join(f"[{name}](#{anchor})" for name, anchor in SECTIONS), PAGE_STYLE}
    runs = Store(app_db).query("SELECT id, task_id, agent FROM runs")
    ours |= {run_links(run, task, gold) for run, task, _ in runs
             for gold in [None, *(g for g, t, a in runs if a == "gold" and t == task and g != run)]}
    bad = {s: _markup_in(s) for s in sources if s not in ours and _markup_in(s)}
    assert not bad, bad
    shown = "\n".join([_plain(s) for s in sources] + unparsed)
    for key in ("question", "method", "insight", "analysis", "definition", "type", "category", "detail", "reason",
                "agent", "tool", "rule"):
        assert texts[key] in shown, (key, texts[key])
    assert payloads(9)["image"] in shown and payloads(9)["link"] in shown


def _dom_refs(page) -> list[str]:
    """Every URL the page's elements point at or load: src, href, srcset, poster, and inline scripts' text."""
    return page.evaluate("""() => [...document.querySelectorAll('*')].flatMap(e => [
        e.getAttribute('src'), e.getAttribute('href'), e.getAttribute('srcset'), e.getAttribute('poster'),
        e.tagName === 'SCRIPT' ? e.textContent : null].filter(Boolean))""")


@pytest.mark.slow
def test_a_real_browser_fetches_nothing_the_texts_point_at(app_db, app_server, table):
    from playwright.sync_api import expect, sync_playwright

    from failatlas.store import Store
    from tests.app.test_e2e import CHROMIUM

    taxonomy_id = Store(app_db).query("SELECT id FROM taxonomies")[0][0]
    with CountingServer("127.0.0.1") as server:
        texts = poison(app_db, server.port)
        port = app_server()
        base = f"http://127.0.0.1:{port}/?"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            requested: list[str] = []
            page.on("request", lambda r: requested.append(r.url) if f":{server.port}" in r.url else None)
            page.goto(base + "&".join(f"{k}={v}" for k, v in _drill_url(taxonomy_id).items()),
                      wait_until="networkidle")
            # the run's own view (sections, no tabs since issue 20), then the type and insight it was opened from
            expect(page.get_by_role("heading", name="Monitor")).to_be_visible(timeout=60_000)
            page.wait_for_timeout(1000)
            drill = page.inner_text("body").replace("\u2060", "")
            dom = _dom_refs(page)
            without_run = {k: v for k, v in _drill_url(taxonomy_id).items() if k != "run"}
            page.goto(base + "&".join(f"{k}={v}" for k, v in without_run.items()), wait_until="networkidle")
            expect(page.get_by_role("heading", name="Insight", exact=True)).to_be_visible(timeout=60_000)
            page.wait_for_timeout(1000)
            drill += page.inner_text("body").replace("\u2060", "")
            dom += _dom_refs(page)
            page.goto(base + f"page=taxonomy&taxonomy={taxonomy_id}", wait_until="networkidle")
            expect(page.get_by_text("Implementation · 3 types")).to_be_visible(timeout=60_000)
            page.wait_for_timeout(1500)
            dom += _dom_refs(page)
            taxonomy = page.inner_text("body").replace("\u2060", "")
            browser.close()
    assert server.hits == [] and requested == [], (server.hits, requested)
    for key in ("question", "method", "insight", "detail", "reason", "definition"):
        assert texts[key] in drill, key
    assert texts["category"] in taxonomy
    assert not [ref for ref in dom if f":{server.port}" in ref or "javascript:" in ref]
    table.record("attack-app-markup", "images, <img>/<script>, javascript: and reference links, autolinks and "
                 "Streamlit colour/icon/math in a task's question and method, an insight, judges' analyses, the "
                 "validator, the monitor, tool, model, failure type and category names: real Chromium on the drill-"
                 "down (the run's view and the insight's) and the taxonomy page made 0 requests to the payloads' "
                 f"server, 0 of {len(dom)} "
                 "src/href values point at it or at javascript:, every text shown literally (AppTest: no Markdown "
                 "string of 8 page views renders an image, link or HTML)")


@pytest.mark.docker
def test_without_the_guard_a_sandbox_with_network_does_not_start(sandbox_image, monkeypatch, tmp_path):
    """No iptables to check the rule with (as for a user without root): refused, unless the operator opts out."""
    from failatlas.bench_core.sandbox import SandboxError, SandboxSpec, create_sandbox
    from failatlas.bench_core.sandbox.network import GUARD_ENV

    monkeypatch.setenv("PATH", str(tmp_path))  # the harness finds no iptables; docker is reached by its socket
    with pytest.raises(SandboxError) as refused:
        create_sandbox("docker", SandboxSpec(image=sandbox_image, network=True))
    assert "reach services on the Docker host" in str(refused.value) and GUARD_ENV in refused.value.one_line()
    with create_sandbox("docker", SandboxSpec(image=sandbox_image)) as box:  # without network: no guard needed
        assert box.exec(["true"], timeout=20).returncode == 0
    monkeypatch.setenv(GUARD_ENV, "off")
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, network=True)) as box:
        assert box.exec(["true"], timeout=20).returncode == 0
