"""Per-task environments: an image layer on the base image with the repository's own dependencies, built once.

The spec is the repository's: `requirements.txt`, a conda `environment.yml` (its `pip:` part; conda packages are
listed as left out), `pyproject.toml` (`[project] dependencies`), or a Dockerfile the user gives. Pip specs are
installed as the user `agent` (`pip install --user`) in a sandbox under the `registries` network policy (the same
egress proxy and CA bundle as runs), and the container is committed as `failatlas/env:<hash>`, where the hash
covers the base image, the spec's kind and its requirements: 50 runs of one paper install once, and a changed
spec builds a new image. A user Dockerfile is built with `BASE_IMAGE` set to the base, on the egress network,
with HTTP(S)_PROXY as build arguments.

`best_effort` installs each requirement on its own, with its dependencies held to the spec's pins (the spec is
the constraints file), and builds the image with what installs; each failure is kept, classified (`envfail`), on
the image's labels.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from failatlas.bench_core.sandbox.cleanup import docker_client
from failatlas.bench_core.sandbox.envfail import classify_env_failure
from failatlas.bench_core.sandbox.errors import SandboxError
from failatlas.bench_core.sandbox.image import AGENT_UID, IMAGE_LABEL, recipe_hash
from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE, SandboxSpec
from failatlas.core.errors import ConfigError, FailAtlasError, InputError

ENV_REPOSITORY = "failatlas/env"
LABEL_HASH = "failatlas.env.hash"
LABEL_SPEC = "failatlas.env.spec"
LABEL_FAILED = "failatlas.env.failed"
REQUIREMENTS_PATH = "/home/agent/.failatlas-env/requirements.txt"  # docker cannot copy into the /tmp tmpfs
PIP = "python3 -m pip install --user --no-cache-dir --progress-bar off --no-input"
_ROOT_SPECS = ("requirements.txt", "environment.yml", "environment.yaml", "pyproject.toml")
_LOCAL = re.compile(r"^(-e\b|--editable\b|-r\b|-c\b|--requirement\b|--constraint\b|\.|/|file:)")
# a requirement is one line of printable text (a NUL, a newline or another control character would crash the
# command that installs it, or slip a line of its own into the requirements file pip reads) of a length a command
# line holds; a spec of more requirements than this is no task's (each is installed on its own with --best-effort)
MAX_REQUIREMENT_CHARS = 4096
MAX_REQUIREMENTS = 2000
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")

SpecKind = Literal["requirements", "conda", "pyproject", "dockerfile"]
Progress = Callable[[str], None]


class EnvBuildError(FailAtlasError, RuntimeError):
    """The repository's environment could not be installed (its spec's fault, classified), not the harness's."""


class EnvSpec(BaseModel):
    """What an environment is built from: the spec file, the pip requirements it gives (or the Dockerfile's text)
    and what was left out of it (conda packages, local paths)."""

    kind: SpecKind
    file: str
    requirements: list[str] = Field(default_factory=list)
    left_out: list[str] = Field(default_factory=list)
    dockerfile: str | None = None

    def content_hash(self, base: str, *, best_effort: bool = False) -> str:
        recipe = recipe_hash_for(base)
        body = {"base": base, "recipe": recipe, "kind": self.kind, "requirements": self.requirements,
                "dockerfile": self.dockerfile, "mode": "each-constrained" if best_effort else "strict"}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class EnvBuild(BaseModel):
    """What `build_env` did: the image, from which spec, whether it was already there (`cached`), and what did not
    install (requirement, failure kind, evidence)."""

    tag: str
    task_id: str
    spec_kind: str
    spec_file: str
    spec_hash: str
    cached: bool
    duration_s: float
    installed: list[str] = Field(default_factory=list)
    failed: list[dict[str, Any]] = Field(default_factory=list)
    left_out: list[str] = Field(default_factory=list)


def recipe_hash_for(base: str) -> str:
    """The base image's recipe for the default image (so a rebuilt base makes new environments); the tag else."""
    from failatlas.bench_core.sandbox.image import DEFAULT_PACKAGES, DEFAULT_SUITE

    return recipe_hash(DEFAULT_SUITE, DEFAULT_PACKAGES) if base == DEFAULT_IMAGE else base


def _requirement_lines(text: str) -> tuple[list[str], list[str]]:
    keep, left = [], []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        (left if _LOCAL.match(line) else keep).append(line)
    return keep, left


def _installable(requirements: list[str], path: Path) -> tuple[list[str], list[str]]:
    """`requirements` split into those a command may install and notes on those it may not (control characters,
    too long); InputError naming the spec file when it lists more than MAX_REQUIREMENTS."""
    if len(requirements) > MAX_REQUIREMENTS:
        raise InputError(f"lists {len(requirements)} requirements, more than the {MAX_REQUIREMENTS} a task "
                         "environment installs", path=str(path))
    keep, notes = [], []
    for requirement in requirements:
        if _UNPRINTABLE.search(requirement) or len(requirement) > MAX_REQUIREMENT_CHARS:
            notes.append(f"unreadable requirement (control characters or over {MAX_REQUIREMENT_CHARS} characters): "
                         f"{_UNPRINTABLE.sub('?', requirement[:80])!r}")
        else:
            keep.append(requirement)
    return keep, notes


def parse_spec(path: Path, rel: str) -> EnvSpec:
    """The environment spec in the file `path` (named `rel` in records). InputError naming the file when it
    cannot be read or gives nothing to install."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read the environment spec: {exc.strerror}", path=str(path)) from exc
    name = path.name.lower()
    if name == "dockerfile" or name.endswith(".dockerfile"):
        return EnvSpec(kind="dockerfile", file=rel, dockerfile=text)
    if name.endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"not valid TOML: {exc}", path=str(path)) from exc
        deps = (data.get("project") or {}).get("dependencies")
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise InputError("no [project] dependencies list (only PEP 621 metadata is read)", path=str(path),
                             field="project.dependencies")
        keep, notes = _installable(deps, path)
        return EnvSpec(kind="pyproject", file=rel, requirements=keep, left_out=notes)
    if name.endswith((".yml", ".yaml")):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise InputError(f"not valid YAML: {exc}", path=str(path)) from exc
        deps = data.get("dependencies") if isinstance(data, dict) else None
        if not isinstance(deps, list):
            raise InputError("no `dependencies` list (not a conda environment file)", path=str(path),
                             field="dependencies")
        pip: list[str] = []
        conda: list[str] = []
        for dep in deps:
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                pip += [str(p) for p in dep["pip"]]
            elif isinstance(dep, str):
                conda.append(dep)
        keep, local = _requirement_lines("\n".join(pip))
        keep, notes = _installable(keep, path)
        return EnvSpec(kind="conda", file=rel, requirements=keep,
                       left_out=[f"conda package (not installed by pip): {c}" for c in conda]
                       + [f"local requirement: {x}" for x in local] + notes)
    keep, local = _requirement_lines(text)
    keep, notes = _installable(keep, path)
    return EnvSpec(kind="requirements", file=rel, requirements=keep,
                   left_out=[f"local requirement: {x}" for x in local] + notes)


def _is_conda_env(path: Path) -> bool:
    try:
        return bool(re.search(r"^dependencies:", path.read_text(errors="replace"), re.MULTILINE))
    except OSError:
        return False


def find_spec(repo: Path, *, spec_file: str | None = None, dockerfile: Path | None = None) -> EnvSpec:
    """The environment spec of the repository at `repo`: the user's `dockerfile`, else `spec_file` (relative to
    the repository), else the first of requirements.txt, environment.yml, pyproject.toml at the top, then
    requirements*.txt or a conda environment file one folder down. NotFoundError-like InputError when none."""
    if dockerfile is not None:
        return parse_spec(Path(dockerfile), str(dockerfile))
    repo = Path(repo)
    if spec_file:
        target = (repo / spec_file).resolve()
        if (repo / spec_file).is_symlink() or not target.is_relative_to(repo.resolve()) or not target.is_file():
            raise InputError(f"environment spec {spec_file} is not a file of the repository", path=str(repo),
                             field="resources.env_spec")
        return parse_spec(target, spec_file)
    for name in _ROOT_SPECS:
        path = repo / name
        if path.is_symlink() or (path.exists() and not path.resolve().is_relative_to(repo.resolve())):
            raise InputError(f"environment spec {name} is a symlink or resolves outside the repository: refused "
                             "(it would be read from the host)", path=str(path), field="resources.env_spec")
        if path.is_file():
            return parse_spec(path, name)
    below = sorted(p for p in repo.glob("*/*") if p.is_file() and not p.is_symlink()
                   and p.resolve().is_relative_to(repo.resolve()))  # not through a symlinked folder either
    for path in below:
        if re.fullmatch(r"requirements[\w.-]*\.txt", path.name):
            return parse_spec(path, path.relative_to(repo).as_posix())
    for path in below:
        if path.suffix in (".yml", ".yaml") and _is_conda_env(path):
            return parse_spec(path, path.relative_to(repo).as_posix())
    raise InputError("no environment spec found (requirements.txt, environment.yml, pyproject.toml, or a conda "
                     "environment file one folder down)", path=str(repo))


def env_tag(spec: EnvSpec, base: str = DEFAULT_IMAGE, *, best_effort: bool = False) -> str:
    return f"{ENV_REPOSITORY}:{spec.content_hash(base, best_effort=best_effort)[:16]}"


def prebuilt_image(task: Any, repo: Path | None, *, client: Any = None) -> str:
    """The environment image of `task` (a `prebuilt` task) from the repository at `repo`: strict first, then a
    best-effort build. SandboxError (retryable, the runs record it) when neither is built."""
    import docker

    if repo is None:
        raise SandboxError(f"task {task.id}: no repository to read its environment spec from")
    spec = find_spec(repo, spec_file=task.resources.env_spec)
    client = docker_client(client)
    for best_effort in (False, True):
        tag = env_tag(spec, best_effort=best_effort)
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            continue
    raise SandboxError(f"the environment of task {task.id} ({spec.file}) is not built",
                       hint=f"build it with `failatlas sandbox build-env --task {task.id}`")


def _labels(task_id: str, spec: EnvSpec, digest: str, failed: list[dict]) -> dict[str, str]:
    return {IMAGE_LABEL: "env", LABEL_HASH: digest, LABEL_SPEC: f"{spec.kind}:{spec.file}",
            "failatlas.env.task": task_id[:200], LABEL_FAILED: json.dumps(failed)[:20000]}


def build_env(
    task_id: str,
    spec: EnvSpec,
    *,
    base: str = DEFAULT_IMAGE,
    allow_hosts: Sequence[str] = (),
    ca_bundle: str | None = None,
    upstream_proxy: str | None = None,
    best_effort: bool = False,
    force: bool = False,
    timeout_s: float = 3600.0,
    progress: Progress | None = None,
    client: Any = None,
) -> EnvBuild:
    """Build (or find) the environment image of `spec` on `base` through the `registries` route allowing
    `allow_hosts`. Raises EnvBuildError (with the classified failure) when a strict install fails, SandboxError
    when the sandbox or the daemon fails."""
    import docker

    say = progress or (lambda _line: None)
    started = time.monotonic()
    client = docker_client(client)
    digest = spec.content_hash(base, best_effort=best_effort)
    tag = f"{ENV_REPOSITORY}:{digest[:16]}"
    common = dict(tag=tag, task_id=task_id, spec_kind=spec.kind, spec_file=spec.file, spec_hash=digest,
                  left_out=spec.left_out)
    if not force:
        try:
            image = client.images.get(tag)
            labels = image.labels or {}
            failed = json.loads(labels.get(LABEL_FAILED) or "[]")
            say(f"environment {tag} exists (cache hit)")
            return EnvBuild(**common, cached=True, duration_s=time.monotonic() - started, failed=failed,
                            installed=[r for r in spec.requirements if r not in {f["requirement"] for f in failed}])
        except docker.errors.ImageNotFound:
            pass
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        raise SandboxError(f"the base image {base} does not exist",
                           hint="build it with `failatlas sandbox build-image`") from None
    if spec.kind == "dockerfile":
        _build_dockerfile(client, spec, tag, base, list(allow_hosts), upstream_proxy, task_id, digest, say)
        return EnvBuild(**common, cached=False, duration_s=time.monotonic() - started)
    if not spec.requirements:
        raise ConfigError(f"{spec.file} lists no pip requirement to install", hint="; ".join(spec.left_out[:5]))
    installed, failed = _install(client, spec, tag, base, list(allow_hosts), ca_bundle, upstream_proxy, task_id,
                                 digest, best_effort, timeout_s, say)
    return EnvBuild(**common, cached=False, duration_s=time.monotonic() - started, installed=installed,
                    failed=failed)


def _install(client: Any, spec: EnvSpec, tag: str, base: str, hosts: list[str], ca_bundle: str | None,
             upstream: str | None, task_id: str, digest: str, best_effort: bool, timeout_s: float,
             say: Progress) -> tuple[list[str], list[dict]]:
    import docker

    from failatlas.bench_core.sandbox.docker_sandbox import DockerSandbox

    box_spec = SandboxSpec(image=base, network="registries", allow_hosts=hosts, ca_bundle=ca_bundle,
                           upstream_proxy=upstream, memory_mb=8192, cpus=2, pids_limit=2048, tmp_mb=4096,
                           labels={"failatlas.purpose": "build-env", "failatlas.task_id": task_id[:200]},
                           network_env_per_command=True)
    with DockerSandbox.start(box_spec, client=client) as box:
        box.write_file(REQUIREMENTS_PATH, "\n".join(spec.requirements) + "\n")
        installed, failed = install_spec(box, PIP, REQUIREMENTS_PATH, spec, best_effort=best_effort,
                                         timeout_s=timeout_s, say=say)
        check_heavy(box, "python3", spec, failed, hint="give a Dockerfile that installs them, or fix the spec's pins")
        box.exec(f"rm -rf {posixpath.dirname(REQUIREMENTS_PATH)} ~/.cache/pip", timeout=60)
        base_env = (client.images.get(base).attrs.get("Config") or {}).get("Env") or []
        repository, _, version = tag.partition(":")
        slow = docker.from_env(timeout=3600)  # committing gigabytes of site-packages takes minutes
        try:
            slow.api.commit(box.container.id, repository=repository, tag=version, conf={
                "Env": base_env, "User": f"{AGENT_UID}:{AGENT_UID}", "Cmd": ["/bin/bash"],
                "Labels": _labels(task_id, spec, digest, failed)})
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot commit the environment image {tag}: {exc}") from exc
        finally:
            slow.close()
    return installed, failed


def install_spec(box: Any, pip: str, requirements_path: str, spec: EnvSpec, *, best_effort: bool, timeout_s: float,
                 say: Progress) -> tuple[list[str], list[dict]]:
    """Install `spec` with the command `pip` in `box`, whose file `requirements_path` lists it: in one resolve
    (EnvBuildError with the classified reason when it fails), or with `best_effort` each requirement on its own,
    held to the spec's pins; returns what installed and what failed (requirement, kind, evidence)."""
    if not best_effort:
        say(f"pip install -r {spec.file} ({len(spec.requirements)} requirement(s)) through the registries route")
        res = box.exec(f"{pip} -r {requirements_path}", timeout=timeout_s)
        if not res.success:
            text = res.stderr + "\n" + res.stdout
            found = classify_env_failure(text)
            what = f"{found.kind}: {found.evidence}" if found else (text.strip().splitlines() or ["?"])[-1]
            raise EnvBuildError(f"installing {spec.file} failed ({what})",
                                hint="fix the spec, give a Dockerfile, or build with --best-effort")
        return list(spec.requirements), []
    installed: list[str] = []
    failed: list[dict] = []
    for n, requirement in enumerate(spec.requirements, 1):
        res = box.exec(f"{pip} -c {requirements_path} {shlex.quote(requirement)}", timeout=timeout_s)
        if res.success:
            installed.append(requirement)
            say(f"[{n}/{len(spec.requirements)}] {requirement}: installed")
            continue
        found = classify_env_failure(res.stderr + "\n" + res.stdout)
        if found is not None and found.kind == "version_conflict":
            # with the spec as constraints pip calls a pin it cannot find a conflict: ask about it alone
            alone = box.exec(f"{pip} --dry-run --no-deps {shlex.quote(requirement)}", timeout=timeout_s)
            found = (classify_env_failure(alone.stderr + "\n" + alone.stdout) or found) \
                if not alone.success else found
        failed.append({"requirement": requirement, "kind": found.kind if found else "install_failed",
                       "evidence": found.evidence if found else (res.stderr.strip().splitlines()
                                                                 or ["?"])[-1][:500]})
        say(f"[{n}/{len(spec.requirements)}] {requirement}: FAILED ({failed[-1]['kind']})")
    return installed, failed


def check_heavy(box: Any, python: str, spec: EnvSpec, failed: list[dict], *, hint: str) -> None:
    """EnvBuildError naming them when the spec asks for heavy packages (torch, jax, tensorflow) and `python` in
    `box` can find none of them: an environment without the framework the code is written for is no environment
    for it, whatever else installed (issue 52). Some of several found is enough; the rest are in `failed`."""
    from failatlas.bench_core.sandbox.envfail import heavy_modules

    wanted = heavy_modules(spec.requirements)
    if not wanted:
        return
    probe = f"import importlib.util as u; print(' '.join(m for m in {sorted(wanted)!r} if u.find_spec(m)))"
    res = box.exec([python, "-c", probe], timeout=300)
    if res.success and res.stdout.split():
        return
    why = {f["requirement"]: f"{f['kind']}" for f in failed}
    names = ", ".join(f"{req} ({why.get(req, 'installed, but not importable')})" for req in wanted.values())
    raise EnvBuildError(f"the environment has none of the spec's heavy packages: {names}", hint=hint)


def _build_dockerfile(client: Any, spec: EnvSpec, tag: str, base: str, hosts: list[str], upstream: str | None,
                      task_id: str, digest: str, say: Progress) -> None:
    import io

    import docker

    from failatlas.bench_core.sandbox.egress import Egress, proxy_env

    egress = Egress.start(client, SandboxSpec(image=base, network="registries", allow_hosts=hosts,
                                              upstream_proxy=upstream, labels={"failatlas.purpose": "build-env"}))
    try:
        say(f"docker build {spec.file} (BASE_IMAGE={base}) through the registries route")
        buildargs = {"BASE_IMAGE": base, **proxy_env()}
        client.images.build(fileobj=io.BytesIO((spec.dockerfile or "").encode()), tag=tag, rm=True, forcerm=True,
                            buildargs=buildargs, network_mode=egress.network_name, pull=False,
                            labels=_labels(task_id, spec, digest, []))
    except docker.errors.BuildError as exc:
        lines = "\n".join(str(c.get("stream") or c.get("error") or "") for c in exc.build_log)
        found = classify_env_failure(lines)
        what = f"{found.kind}: {found.evidence}" if found else str(exc)
        raise EnvBuildError(f"building {spec.file} failed ({what})") from exc
    except docker.errors.DockerException as exc:
        raise SandboxError(f"docker build of {spec.file} failed: {exc}") from exc
    finally:
        egress.close()


class TaskEnvInputs(BaseModel):
    """What a task's environment is built from here: the task's id, its spec, the hosts `registries` allows, the
    CA bundle's path (None: none) and this host's upstream proxy."""

    task_id: str
    spec: EnvSpec
    hosts: list[str]
    ca_bundle: str | None
    upstream_proxy: str | None


def task_env_inputs(store: Any, task_id: str, *, repo: Path | None = None, dockerfile: Path | None = None,
                    allow_hosts: Sequence[str] = (), ca_bundle: str | None = None) -> TaskEnvInputs:
    """The catalog's task `task_id`'s environment inputs: its repository (`repo`, else the repository cache's
    checkout, else its bundled folder), its spec (`resources.env_spec`, else found), the hosts `registries` allows
    here (this host's indexes, the task's and `allow_hosts`), the CA bundle (`ca_bundle`, else this host's; "none"
    for none) and this host's upstream proxy. Raises NotFoundError for an unknown task or a missing repository."""
    from failatlas.bench_core.repos import repository_for
    from failatlas.bench_core.sandbox import policy
    from failatlas.bench_core.tasks.catalog import get_task
    from failatlas.bench_core.tasks.paths import task_path
    from failatlas.core.errors import NotFoundError

    task = get_task(store, task_id)
    if repo is not None:
        path: Path | None = Path(repo).resolve()
    elif (cached := repository_for(store, task)) is not None:
        path = Path(cached.path)
    elif task.repository.local_path:
        path = task_path(task, task.repository.local_path, field="repository.local_path")
    else:
        path = None
    if dockerfile is None and (path is None or not path.is_dir()):
        raise NotFoundError(f"task {task_id}: its repository is not available",
                            hint="add it with `failatlas repos add`, or pass --repo")
    spec = find_spec(path or Path("."), spec_file=task.resources.env_spec, dockerfile=dockerfile)
    bundle = None if (ca_bundle or "").lower() == "none" else policy.ca_bundle(ca_bundle or
                                                                              policy.default_ca_bundle())
    return TaskEnvInputs(task_id=task.id, spec=spec,
                         hosts=policy.registry_hosts([*task.resources.allow_hosts, *allow_hosts]),
                         ca_bundle=bundle.path if bundle else None, upstream_proxy=policy.upstream_proxy())


def build_task_env(
    store: Any,
    task_id: str,
    *,
    repo: Path | None = None,
    dockerfile: Path | None = None,
    base: str = DEFAULT_IMAGE,
    allow_hosts: Sequence[str] = (),
    ca_bundle: str | None = None,
    best_effort: bool = False,
    force: bool = False,
    progress: Progress | None = None,
) -> EnvBuild:
    """`build_env` for the catalog's task `task_id` with its inputs (`task_env_inputs`)."""
    got = task_env_inputs(store, task_id, repo=repo, dockerfile=dockerfile, allow_hosts=allow_hosts,
                          ca_bundle=ca_bundle)
    return build_env(got.task_id, got.spec, base=base, allow_hosts=got.hosts, ca_bundle=got.ca_bundle,
                     upstream_proxy=got.upstream_proxy, best_effort=best_effort, force=force, progress=progress)
