"""Docker sandboxes without network reuse a holder's network namespace one at a time (docker_netns.py): offline as
before, never two at once, never one that a socket outlived, and no holder left once its process ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import docker
import pytest

from failatlas.bench_core.sandbox import SandboxSpec, cleanup_orphans, create_sandbox, docker_netns
from failatlas.bench_core.sandbox.cleanup import LABEL, LABEL_PID

pytestmark = pytest.mark.docker

_SERVER = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
c = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); a, _ = s.accept()
a.close(); c.close(); s.close()  # the accepted side closed first: its port stays in TIME_WAIT for a minute
"""
_BIND = """
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1]))); print("bound")
except OSError as exc:
    print("busy", exc.errno)
"""


def _netns(box) -> str:  # noqa: ANN001
    return box.exec("readlink /proc/self/ns/net", timeout=30).stdout.strip()


def test_sandboxes_one_after_another_reuse_a_holder_and_stay_offline(sandbox_image: str, run_id: str) -> None:
    holders = []
    for _ in range(2):
        with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
            holder = box._netns
            assert holder is not None, docker_netns.pool().off
            holders.append(holder.container.id)
            # the sandbox is in the holder's namespace, which has a loopback and nothing else
            assert _netns(box) == os.readlink(f"/proc/{holder.pid}/ns/net")
            links = box.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", timeout=30).stdout.split()
            assert links == ["lo"]
            assert box.exec("hostname", timeout=30).stdout.strip() == "sandbox"
            if len(holders) == 2:  # a try at the network changes the namespace's counters: the last sandbox's
                out = box.exec(["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"],
                               timeout=30)
                assert out.returncode != 0 and "OSError" in out.stderr
    assert holders[0] == holders[1]


def test_two_sandboxes_at_once_never_share_a_namespace(sandbox_image: str, run_id: str) -> None:
    serve = ("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 28411)); s.listen();"
             "u = socket.socket(socket.AF_UNIX); u.bind('\\0failatlas-test'); u.listen(); time.sleep(5)")
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as one, \
            create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as two:
        assert one._netns is not None and two._netns is not None
        assert one._netns.container.id != two._netns.container.id and _netns(one) != _netns(two)
        started = threading.Event()

        def server() -> None:
            started.set()
            one.exec(["python3", "-c", serve], timeout=20)

        thread = threading.Thread(target=server)
        thread.start()
        started.wait()
        probe = ("import socket, time\n"
                 "for _ in range(100):\n"
                 "    if ':6EFB' in open('/proc/net/tcp').read(): break\n"
                 "    time.sleep(0.1)\n"
                 "for family, where in ((socket.AF_INET, ('127.0.0.1', 28411)),\n"
                 "                      (socket.AF_UNIX, '\\0failatlas-test')):\n"
                 "    try: socket.socket(family).connect(where); print('reached')\n"
                 "    except OSError: print('refused')\n")
        seen_in_one = one.exec(["python3", "-c", probe], timeout=20).stdout.split()
        seen_in_two = two.exec(["python3", "-c", probe], timeout=20).stdout.split()
        thread.join(timeout=30)
    assert seen_in_one == ["reached", "reached"]  # the server was up: the other sandbox could have seen it
    assert seen_in_two == ["refused", "refused"]


def test_a_socket_left_in_time_wait_retires_the_holder(sandbox_image: str, run_id: str) -> None:
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        first = box._netns
        assert first is not None
        box.exec(["python3", "-c", _SERVER, "28412"], timeout=30)
        # in that namespace the port is busy for a minute for a program that binds it plainly
        assert box.exec(["python3", "-c", _BIND, "28412"], timeout=30).stdout.split()[0] == "busy"
    client = docker.from_env()
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(first.container.id)  # retired, not handed on
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id != first.container.id
        assert box.exec(["python3", "-c", _BIND, "28412"], timeout=30).stdout.strip() == "bound"


def test_a_sandbox_that_failed_to_start_gives_its_holder_back(sandbox_image: str, run_id: str) -> None:
    """A holder removed behind the pool's back (another process's `sandbox cleanup --all`) costs nothing: the
    sandbox makes its own namespace."""
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        holder = box._netns
    assert holder is not None
    docker.from_env().api.remove_container(holder.container.id, force=True)
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box.exec("echo ok", timeout=30).stdout == "ok\n"
        assert box._netns is None or box._netns.container.id != holder.container.id


_OWNER = """
import os, sys
from failatlas.bench_core.sandbox import SandboxSpec, create_sandbox
with create_sandbox("docker", SandboxSpec(image=sys.argv[1], run_id=sys.argv[2])) as box:
    assert box._netns is not None
print(os.getpid(), flush=True)
if sys.argv[3] == "hold":
    sys.stdin.read()  # until killed: its free holder is left behind, an orphan
"""


def _holders(pid: int) -> list[str]:
    found = docker.from_env().api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={pid}",
                                                                          "failatlas.purpose=netns"]})
    return [c["Id"] for c in found]


def test_holders_go_when_their_process_ends_or_as_orphans(sandbox_image: str, run_id: str) -> None:
    done = subprocess.run([sys.executable, "-c", _OWNER, sandbox_image, run_id, "exit"], capture_output=True,
                          text=True, timeout=120, check=True)
    assert _holders(int(done.stdout.strip())) == []
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, sandbox_image, run_id, "hold"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        pid = int(owner.stdout.readline().strip())
        assert len(_holders(pid)) == 1
        owner.kill()
        owner.wait(timeout=60)
        cleanup_orphans()
        assert _holders(pid) == []
    finally:
        owner.kill()
        owner.wait(timeout=60)


def test_switched_off_each_sandbox_has_a_namespace_of_its_own(sandbox_image: str, run_id: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(docker_netns.ENV, "0")
    monkeypatch.setattr(docker_netns, "_POOL", None)
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is None
        mode = docker.from_env().api.inspect_container(box.container.id)["HostConfig"]["NetworkMode"]
        assert mode == "none" and box.exec("hostname", timeout=30).stdout.strip() == "sandbox"
    monkeypatch.setattr(docker_netns, "_POOL", None)  # the next test's sandboxes get a pool again


_FLOW_LABEL = """
import socket, struct
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
# struct in6_flowlabel_req: destination, label, action GET, share ANY, flags CREATE, expires, linger (seconds)
req = (socket.inet_pton(socket.AF_INET6, "::1") + struct.pack("!I", 0xABCDE)
       + struct.pack("BBHHHI", 0, 255, 1, 150, 150, 0))
s.setsockopt(socket.IPPROTO_IPV6, 32, req)  # IPV6_FLOWLABEL_MGR
s.close()
print(open("/proc/net/ip6_flowlabel").read().count("ABCDE"))
"""


@pytest.mark.parametrize("leave", ["datagrams", "flow-label"])
def test_what_outlives_a_sandbox_in_its_namespace_retires_the_holder(sandbox_image: str, run_id: str,
                                                                     leave: str) -> None:
    """Not sockets only: counters a sandbox sets at will (the loopback's packets, UDP's SNMP counters) and an IPv6
    flow label that lingers after its socket would carry values from one run to the next."""
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        first = box._netns
        assert first is not None
        if leave == "datagrams":
            sent = box.exec(["python3", "-c", "import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
                             "[u.sendto(b'x', ('127.0.0.1', 9)) for _ in range(42)]"], timeout=30)
            assert sent.returncode == 0, sent.stderr
        else:
            left = box.exec(["python3", "-c", _FLOW_LABEL], timeout=30)
            assert left.stdout.strip() == "1", left.stderr  # lingering after its socket was closed
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id != first.container.id
        seen = box.exec("grep '^Udp: [0-9]' /proc/net/snmp; grep -c ABCDE /proc/net/ip6_flowlabel", timeout=30)
        udp, labels = seen.stdout.split("\n")[:2]
        assert udp.split()[2] == "0" and labels == "0"  # NoPorts: nothing sent here


@pytest.mark.parametrize("change", ["content", "mode", "xattr", "mtime"])
def test_a_root_sandbox_that_changed_a_name_file_retires_the_holder(sandbox_image: str, run_id: str,
                                                                    change: str) -> None:
    """Docker gives a sandbox in a holder's namespace the holder's /etc/hosts, which a root user owns: an entry,
    a mode that lets the next sandbox's user write it, an extended attribute or a time would outlive it."""
    command = {"content": "echo '10.9.9.9 pypi.org' >> /etc/hosts",
               "mode": "chmod 666 /etc/hosts",
               "xattr": "python3 -c \"import os; os.setxattr('/etc/hosts', 'user.note', b'left')\"",
               "mtime": "touch -m -d @987654321 /etc/hosts"}[change]
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id, user="0:0")) as box:
        first = box._netns
        assert first is not None
        wrote = box.exec(f"{command} && echo done", timeout=30)
        assert wrote.stdout.strip() == "done", wrote.stderr
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id != first.container.id
        seen = box.exec("stat -c '%a %Y' /etc/hosts; grep -c 10.9.9.9 /etc/hosts", timeout=30).stdout.split()
        assert seen[0] == "644" and seen[1] != "987654321" and seen[2] == "0"


def test_a_sandbox_that_only_read_the_name_files_hands_the_holder_on_with_their_times_put_back(
        sandbox_image: str, run_id: str) -> None:
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        holder = box._netns
        assert holder is not None
        path = holder.files["HostsPath"][0]
        fresh = holder.files["HostsPath"][-1]
        box.exec("cat /etc/hosts /etc/resolv.conf /etc/hostname > /dev/null; getent hosts localhost", timeout=30)
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id == holder.container.id
        assert os.stat(path).st_atime_ns == fresh


_ROUTE_AGE = """
import os, socket, struct, sys
os.sched_setaffinity(0, {0})  # the route cache is per CPU
if sys.argv[1] == "cache":  # a UDP connect caches the loopback's route: no packet is sent, no /proc/net file changes
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(("127.0.0.3", 9)); u.close()
    raise SystemExit
# RTM_GETROUTE for 127.0.0.3; the age of the cached route is rta_cacheinfo.lastuse (attribute 12), 0 when none
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
dst = socket.inet_aton("127.0.0.3")
body = struct.pack("BBBBBBBBI", socket.AF_INET, 32, 0, 0, 0, 0, 0, 0, 0) + struct.pack("HH", 8, 1) + dst
s.send(struct.pack("IHHII", 16 + len(body), 26, 1, 1, 0) + body)
data = s.recv(65536)
length, kind = struct.unpack("IH", data[:6])
off, age = 28, 0
while kind == 24 and off + 4 <= length:
    size, attr = struct.unpack("HH", data[off:off + 4])
    if size < 4:
        break
    if attr == 12:
        age = struct.unpack("I", data[off + 8:off + 12])[0]
    off += (size + 3) & ~3
print(kind, age)
"""


def test_a_cached_route_is_flushed_before_the_holder_is_handed_on(sandbox_image: str, run_id: str) -> None:
    """A route cached by a UDP connect has no file under /proc/net, and its age told the next sandbox when the
    last one looked it up: the caches are flushed at each hand-back."""
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        first = box._netns
        assert first is not None
        box.exec(["python3", "-c", _ROUTE_AGE, "cache"], timeout=30)
        kind, age = box.exec(["python3", "-c", _ROUTE_AGE, "read"], timeout=30).stdout.split()
        assert kind == "24" and int(age) > 0  # cached, as the next sandbox would have seen it unflushed
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id == first.container.id  # reused
        assert box.exec(["python3", "-c", _ROUTE_AGE, "read"], timeout=30).stdout.split() == ["24", "0"]


def test_a_root_sandbox_never_hands_its_holder_on(sandbox_image: str, run_id: str) -> None:
    """Root owns the holder's name files and can set what no comparison lists in full (an ext4 generation number,
    blocks allocated past the end): a root sandbox retires its holder even when it seems to have changed nothing."""
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id, user="0:0")) as box:
        first = box._netns
        assert first is not None and box.exec("id -u", timeout=30).stdout.strip() == "0"
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id != first.container.id


def test_the_namespace_is_read_from_inside_by_a_thread_that_leaves_the_caller_where_it_was(
        sandbox_image: str, run_id: str) -> None:
    """`_kernel` reads the holder's sysctls (its loopback's, none of the host's interfaces) from a thread that
    enters the namespace; the caller's own namespace is unchanged, and a pid whose namespace is not the holder's
    any more is refused."""
    own = os.readlink("/proc/thread-self/ns/net")
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        holder = box._netns
        assert holder is not None
        read = docker_netns._kernel(holder.pid, holder.inode)
        host = {line.split(b"/")[6] for line in read.splitlines() if line.startswith(b"/proc/sys/net/ipv4/conf/")}
        assert host == {b"all", b"default", b"lo"}, host
        assert os.readlink("/proc/thread-self/ns/net") == own
        with pytest.raises(OSError, match="no longer"):
            docker_netns._kernel(os.getpid(), holder.inode)
    assert os.readlink("/proc/thread-self/ns/net") == own


def test_a_fast_open_key_made_by_a_listener_retires_the_holder(sandbox_image: str, run_id: str) -> None:
    """A listener with TCP Fast Open makes its namespace's key (a root-only sysctl, no file under /proc/net); the
    key would outlive the sandbox, so the holder is retired (its sysctls are read from inside it)."""
    listen = ("import socket; s = socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 5);"
              "s.bind(('127.0.0.1', 0)); s.listen(); s.close()")
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        first = box._netns
        assert first is not None
        made = box.exec(["python3", "-c", listen], timeout=30)
        assert made.returncode == 0, made.stderr
    with create_sandbox("docker", SandboxSpec(image=sandbox_image, run_id=run_id)) as box:
        assert box._netns is not None and box._netns.container.id != first.container.id
