"""What the host says about its indexes, proxy and CA bundle; environment-failure classes; environment specs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from failatlas.bench_core.sandbox import SandboxSpec
from failatlas.bench_core.sandbox.envbuild import env_tag, find_spec, parse_spec
from failatlas.bench_core.sandbox.envfail import classify_env_failure, egress_steps, env_failure_steps
from failatlas.bench_core.sandbox.policy import (
    as_policy,
    ca_bundle,
    check_host,
    default_ca_bundle,
    pip_env,
    pip_settings,
    registry_hosts,
    upstream_proxy,
)
from failatlas.bench_core.tasks.model import Resources
from failatlas.core.errors import ConfigError, InputError

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_policies_accept_the_old_booleans_and_refuse_others():
    assert [as_policy(v) for v in (False, True, None, "Registries", "full")] == [
        "none", "full", "none", "registries", "full"]
    with pytest.raises(ValueError, match="none, registries, full"):
        as_policy("internet")
    assert SandboxSpec(network=True).network == "full" and not SandboxSpec().has_network
    assert Resources(network=True).network == "full" and Resources().network == "none"
    with pytest.raises(ValueError):
        Resources(network="everything")
    with pytest.raises(ValueError, match="not a host name"):  # pydantic's ValidationError is a ValueError
        SandboxSpec(network="registries", allow_hosts=["pypi.org/simple"])


def test_pip_config_files_then_environment(tmp_path: Path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example.org/simple\ncert = /x.pem\n"
                    "[install]\nextra-index-url = https://extra.example.net/simple https://pypi.org/simple\n")
    got = pip_settings([conf], env={"PIP_PROXY": "http://proxy.corp:3128"})
    assert got == {"index-url": "https://mirror.example.org/simple", "cert": "/x.pem",
                   "extra-index-url": "https://extra.example.net/simple https://pypi.org/simple",
                   "proxy": "http://proxy.corp:3128"}
    assert pip_settings([conf], env={"PIP_INDEX_URL": "https://other.example.com/simple"})["index-url"] == \
        "https://other.example.com/simple"


def test_registry_hosts_from_pip_apt_and_the_user(tmp_path: Path):
    one_line = tmp_path / "sources.list"
    one_line.write_text("deb [signed-by=/k.gpg] http://mirror.example.org/debian bookworm main\n# deb http://no/\n")
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n\n"
                      "Types: deb\nURIs: http://deb.debian.org/debian-security\n")
    hosts = registry_hosts(["Files.Example.com", "*.corp.example"], pip={"index-url": "https://idx.example/simple"},
                           apt_files=[str(one_line), str(deb822)])
    # a configured index replaces PyPI: PyPI is not allowed unless it is configured too
    assert hosts == ["*.corp.example", "deb.debian.org", "files.example.com", "idx.example", "mirror.example.org"]
    assert {"pypi.org", "files.pythonhosted.org"} <= set(registry_hosts(pip={}, apt_files=[]))
    with pytest.raises(ConfigError, match="not a host name"):
        registry_hosts(["http://evil.example/x"], pip={}, apt_files=[])


def test_upstream_proxy_and_ca_bundle(tmp_path: Path):
    assert upstream_proxy(env={"https_proxy": "proxy.corp:8080"}, pip={}) == "http://proxy.corp:8080"
    assert upstream_proxy(env={}, pip={"proxy": "http://p:1"}) == "http://p:1"
    assert upstream_proxy(env={}, pip={}) is None
    bundle = tmp_path / "corp-ca.pem"
    bundle.write_text(PEM)
    assert default_ca_bundle(env={"REQUESTS_CA_BUNDLE": str(bundle)}, pip={}) == str(bundle.resolve())
    assert default_ca_bundle(env={"REQUESTS_CA_BUNDLE": str(tmp_path / "gone")}, pip={"cert": str(bundle)}) == \
        str(bundle.resolve())
    ref = ca_bundle(bundle)
    assert ref.sha256 == hashlib.sha256(PEM.encode()).hexdigest() and "BEGIN" not in ref.model_dump_json()
    (tmp_path / "not.pem").write_text("hello")
    with pytest.raises(ConfigError, match="not a PEM"):
        ca_bundle(tmp_path / "not.pem")
    with pytest.raises(ConfigError, match="cannot read"):
        ca_bundle(tmp_path / "missing.pem")


@pytest.mark.parametrize(("output", "kind", "package"), [
    ("ERROR: Could not find a version that satisfies the requirement torch==1.13.1 (from versions: 2.0.0)\n"
     "ERROR: No matching distribution found for torch==1.13.1", "package_not_found", "torch==1.13.1"),
    ("WARNING: Retrying ... ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 403 "
     "Forbidden'))\nERROR: No matching distribution found for textdistance", "network_refused", None),
    ("WARNING: Retrying ... ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 502 "
     "Bad Gateway'))\nERROR: No matching distribution found for textdistance", "registry_unreachable", None),
    ("curl: (56) ... failatlas: cannot reach deb.debian.org:80: timed out", "registry_unreachable", None),
    ("  Failed building wheel for bottleneck\nERROR: Could not build wheels for bottleneck", "wheel_build_failed",
     "bottleneck"),
    ("ERROR: Cannot install a==1 and b==2 because these package versions have conflicting dependencies.\n"
     "ERROR: ResolutionImpossible: for help visit ...", "version_conflict", None),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "cuda_mismatch", None),
    ("AssertionError: Torch not compiled with CUDA enabled", "cuda_mismatch", None),
    ("Traceback ...\nModuleNotFoundError: No module named 'textdistance'", "missing_module", "textdistance"),
])
def test_environment_failures_are_classified(output: str, kind: str, package: str | None):
    found = classify_env_failure(output)
    assert (found.kind, found.package) == (kind, package)
    assert found.evidence in output


def test_own_modules_and_other_errors_are_not_environment_failures():
    assert classify_env_failure("ModuleNotFoundError: No module named 'ridge'", own_modules={"ridge"}) is None
    assert classify_env_failure("ValueError: shapes (3,) and (4,) not aligned") is None


def test_trace_steps_from_commands_and_the_proxy_log():
    commands = [
        {"seq": 0, "command": "pip install x", "exit_code": 1, "timed_out": False, "stdout_tail": "",
         "stderr_tail": "ERROR: No matching distribution found for x"},
        {"seq": 1, "command": "python run.py", "exit_code": 0, "timed_out": False, "stdout_tail": "ok",
         "stderr_tail": "No module named 'y'"},  # succeeded: not a failure
    ]
    [step] = env_failure_steps(commands)
    assert (step["kind"], step["tool"], step["arguments"]["package"], step["arguments"]["command_seq"]) == (
        "env_failure", "package_not_found", "x", 0)
    log = [{"ts": "t", "method": "CONNECT", "host": "arxiv.org", "port": 443, "allowed": False, "reason": "r"}]
    [net] = egress_steps(log)
    assert net["kind"] == "network" and net["content"].startswith("refused CONNECT arxiv.org:443")


def test_specs_from_the_repository(tmp_path: Path):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "jme.yml").write_text(
        "name: x\ndependencies:\n  - python=3.10\n  - cudatoolkit=11.6\n  - pip:\n    - numpy==1.23.5\n"
        "    - -e .\n    - tabulate==0.9.0\n")
    spec = find_spec(tmp_path)
    assert (spec.kind, spec.file, spec.requirements) == ("conda", "env/jme.yml", ["numpy==1.23.5", "tabulate==0.9.0"])
    assert spec.left_out == ["conda package (not installed by pip): python=3.10",
                             "conda package (not installed by pip): cudatoolkit=11.6", "local requirement: -e ."]
    (tmp_path / "requirements.txt").write_text("# deps\nrequests>=2  # http\n-r other.txt\n")
    top = find_spec(tmp_path)
    assert (top.kind, top.requirements, top.left_out) == ("requirements", ["requests>=2"],
                                                          ["local requirement: -r other.txt"])
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["attrs>=22"]\n')
    assert find_spec(tmp_path, spec_file="pyproject.toml").requirements == ["attrs>=22"]
    # the tag follows the content: same spec, same tag; one requirement more, another tag
    assert env_tag(top) == env_tag(parse_spec(tmp_path / "requirements.txt", "requirements.txt"))
    (tmp_path / "requirements.txt").write_text("requests>=2\nsix\n")
    assert env_tag(find_spec(tmp_path)) != env_tag(top)


def test_bad_specs_name_the_file(tmp_path: Path):
    with pytest.raises(InputError, match="no environment spec found"):
        find_spec(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.poetry]\nname = 'x'\n")
    with pytest.raises(InputError, match=r"pyproject.toml field 'project.dependencies'"):
        find_spec(tmp_path)
    with pytest.raises(InputError, match="not a file of the repository"):
        find_spec(tmp_path, spec_file="../etc/passwd")


@pytest.mark.parametrize("name", ["requirements.txt", "environment.yml", "pyproject.toml"])
def test_a_top_level_spec_that_is_a_symlink_is_refused(tmp_path: Path, name: str):
    """A repository's spec file that links to a host file (or out of the repository) is never read."""
    secret = tmp_path / "host_secret.txt"
    secret.write_text("hunter2-token\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / name).symlink_to(secret)
    with pytest.raises(InputError, match=f"{name} is a symlink or resolves outside"):
        find_spec(repo)
    (repo / name).unlink()
    (repo / "inner.txt").write_text("numpy\n")
    (repo / name).symlink_to(repo / "inner.txt")  # inside, but still a link: refused like spec_file's
    with pytest.raises(InputError, match="symlink"):
        find_spec(repo)
    with pytest.raises(InputError, match="not a file of the repository"):
        find_spec(repo, spec_file=name)


def test_a_symlinked_folder_does_not_lead_the_spec_search_out(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "requirements.txt").write_text("secret-package\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "sub").symlink_to(outside)
    with pytest.raises(InputError, match="no environment spec found"):
        find_spec(repo)


@pytest.mark.parametrize("host", ["*.com", "*.org.", "localhost", "127.0.0.1", "10.0.0.5", "169.254.169.254",
                                  "[::1]", "2130706433", "host.docker.internal", "foo.localhost", "*.internal",
                                  "pypi.org:99999"])
def test_a_task_cannot_allow_wildcard_tlds_ips_or_local_hosts(host: str):
    with pytest.raises(ValueError, match=r"resources\.allow_hosts"):
        Resources(network="registries", allow_hosts=[host])


def test_host_names_ports_and_the_users_ip_literals():
    assert Resources(allow_hosts=["PyPI.org", "*.example.org", "mirror.example.org:8080"]).allow_hosts == [
        "pypi.org", "*.example.org", "mirror.example.org:8080"]
    # the user (--allow-host) and this host's own pip/apt settings may name a private mirror by address...
    assert check_host("10.0.0.5") == "10.0.0.5" and check_host("10.0.0.5:3141") == "10.0.0.5:3141"
    # ...but never loopback, link-local (cloud metadata) or a top-level wildcard
    for bad in ("127.0.0.1", "169.254.169.254", "*.com", "localhost"):
        with pytest.raises(ConfigError):
            check_host(bad)
    with pytest.raises(ValueError, match="link-local"):
        SandboxSpec(network="registries", allow_hosts=["169.254.169.254"])
    # ports of a configured index travel with its host; a localhost index (never reachable) is dropped
    hosts = registry_hosts(pip={"index-url": "https://idx.example:8443/simple",
                                "extra-index-url": "http://localhost:3141/simple"}, apt_files=[])
    assert hosts == ["idx.example:8443"]


def test_the_hosts_pip_indexes_go_into_the_sandbox_without_credentials():
    env = pip_env({"index-url": "https://user:tok@idx.example/simple", "trusted-host": "idx.example",
                   "extra-index-url": "https://a.example/simple https://b.example/simple", "cert": "/x.pem"})
    assert env == {"PIP_INDEX_URL": "https://idx.example/simple", "PIP_TRUSTED_HOST": "idx.example",
                   "PIP_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple"}
    assert pip_env({}) == {}
    assert pip_settings([], env={"PIP_TRUSTED_HOST": "idx.example"}) == {"trusted-host": "idx.example"}
