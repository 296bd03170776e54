"""`failatlas sandbox ...`: build the offline base image, list and clean up sandboxes, show GPU leases."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from failatlas.bench_core.sandbox.model import DEFAULT_IMAGE
from failatlas.core.cli import console, err_console, progress_enabled

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.command("build-image")
def build_image(
    tag: Annotated[str, typer.Option(help="Image tag to build.")] = DEFAULT_IMAGE,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the tag exists.")] = False,
    mirror: Annotated[str | None, typer.Option(
        help="Debian mirror (default: $FAILATLAS_DEBIAN_MIRROR or the one this host's apt uses).")] = None,
    suite: Annotated[str, typer.Option(help="Debian suite.")] = "bookworm",
    rootfs: Annotated[bool, typer.Option("--rootfs", help="Also unpack the image's root filesystem into the bwrap "
                                         "cache ($XDG_CACHE_HOME/failatlas/rootfs), from `docker export`.")] = False,
) -> None:
    """Build the sandbox base image offline (debootstrap + docker import); keeps an existing tag. On a Docker engine
    whose storage driver is fuse-overlayfs, root also unpacks its /usr once for the sandboxes' read-only binds
    (docs/sandbox.md, "System folders on a FUSE storage driver"). With --rootfs,
    also unpack its root filesystem for bwrap sandboxes that name the image (kept when cached, unless --force)."""
    from failatlas.bench_core.sandbox.image import build_base_image

    status = err_console.status("building the sandbox image", spinner="dots") if progress_enabled() else None

    def show(line: str) -> None:
        if not line.startswith(("I: ", "W: ")):
            err_console.print(line, highlight=False, markup=False)
        elif status is not None:
            status.update(f"debootstrap: {line[3:][:100]}")

    with status or contextlib.nullcontext():
        result = build_base_image(tag, force=force, mirror=mirror, suite=suite, progress=show)
    verb = "built" if result.built else "kept existing"
    console.print(f"{verb} {result.tag} {result.image_id[:19]} ({result.duration_s:.0f} s)")
    from failatlas.bench_core.sandbox import docker_system
    from failatlas.bench_core.sandbox.cleanup import docker_client

    # on a FUSE storage driver, root unpacks the image's /usr for the sandboxes' read-only binds (docker_system.py)
    docker_system.prepare(docker_client(), result.tag, result.image_id,
                          lambda text: console.print(text, highlight=False, markup=False))
    if rootfs:
        from failatlas.bench_core.sandbox.bwrap_rootfs import build_rootfs

        path, unpacked = build_rootfs(result.tag, force=force)
        console.print(f"{'unpacked' if unpacked else 'kept existing'} the root filesystem of {result.tag} for bwrap: "
                      f"{path}", highlight=False)


@app.command("build-env")
def build_env(
    task: Annotated[str, typer.Option("--task", help="Task id whose repository's environment to build.")],
    repo: Annotated[Path | None, typer.Option(
        help="Repository checkout (default: the task's from the cache, `failatlas repos add`, else bundled).")] = None,
    dockerfile: Annotated[Path | None, typer.Option(
        help="Build this Dockerfile instead of the repository's spec (BASE_IMAGE is the base image).")] = None,
    base: Annotated[str, typer.Option(help="Base image the environment layer goes on.")] = DEFAULT_IMAGE,
    allow_host: Annotated[list[str] | None, typer.Option(
        help="A host the install may reach beyond this host's pip and apt indexes (repeatable).")] = None,
    ca_bundle: Annotated[str | None, typer.Option(
        help="CA bundle for the install ('none' for none; default: the one pip/requests on this host use).")] = None,
    best_effort: Annotated[bool, typer.Option(
        "--best-effort", help="Install each requirement on its own (its dependencies held to the spec's pins) and "
        "keep what installs; failures are listed, classified.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the environment image exists.")] = False,
    venv: Annotated[bool, typer.Option(
        "--venv", help="Build a venv for bwrap runs (hosts without Docker) instead of an image; it sees the "
        "host's packages, the spec's pins over them.")] = False,
    wheels: Annotated[Path | None, typer.Option(
        help="With --venv: a folder of wheels pip may install from (beside the indexes).")] = None,
    offline: Annotated[bool, typer.Option(
        "--offline", help="With --venv: no package index, only --wheels and the host's packages.")] = False,
    python: Annotated[str | None, typer.Option(
        help="With --venv: the interpreter the venv is made with, under a folder sandboxes see (/usr, /opt); "
        "default: the Python running FailAtlas, where sandboxes can see it.")] = None,
) -> None:
    """Build a task's environment from its repository's spec (requirements.txt, environment.yml, pyproject.toml or
    a Dockerfile) as an image layer on the base (or, with --venv, a venv for bwrap runs), through the registries
    network; cached by the spec's hash."""
    from failatlas.bench_core.sandbox.envbuild import build_task_env
    from failatlas.bench_core.sandbox.venvs import build_task_venv
    from failatlas.core.cli import store
    from failatlas.core.errors import ConfigError

    def say(line: str) -> None:
        err_console.print(line, highlight=False, markup=False)

    if venv:
        if dockerfile is not None:
            raise ConfigError("--dockerfile builds an image, not a venv", hint="leave out --venv")
        result = build_task_venv(store(create=False), task, repo=repo, allow_hosts=allow_host or [],
                                 ca_bundle=ca_bundle, wheels=wheels, offline=offline, best_effort=best_effort,
                                 force=force, progress=say, python=python)
    elif wheels is not None or offline or python is not None:
        raise ConfigError("--wheels, --offline and --python build a venv", hint="add --venv")
    else:
        result = build_task_env(store(create=False), task, repo=repo, dockerfile=dockerfile, base=base,
                                allow_hosts=allow_host or [], ca_bundle=ca_bundle, best_effort=best_effort,
                                force=force, progress=say)
    verb = "cache hit" if result.cached else "built"
    console.print(f"{verb}: {result.tag} for {result.task_id} from {result.spec_file} ({result.spec_kind}, "
                  f"{len(result.installed)} installed, {len(result.failed)} failed, {result.duration_s:.0f} s)",
                  highlight=False)
    groups: dict[str, list[str]] = {}
    for line in result.left_out:
        why, _, what = line.rpartition(": ")
        groups.setdefault(why, []).append(what)
    for why, items in groups.items():
        more = f", ... ({len(items) - 8} more)" if len(items) > 8 else ""
        console.print(f"  left out, {len(items)} {why}: {', '.join(items[:8])}{more}", highlight=False,
                      markup=False)
    where = (f"{result.tag}/.failatlas-env.json" if venv else
             f"the label failatlas.env.failed of `docker image inspect {result.tag}`")
    print_failures(result.failed, cached=result.cached, where=where)


def print_failures(failed: list[dict], *, cached: bool, where: str) -> None:
    """The failed requirements, one line per failure kind with the first names (a fresh build printed each one
    with its evidence as it went; a cache hit names where the whole list is), never one line per pin (R7)."""
    by_kind: dict[str, list[str]] = {}
    for item in failed:
        by_kind.setdefault(str(item.get("kind")), []).append(str(item.get("requirement")))
    for kind, names in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        more = f", ... ({len(names) - 8} more)" if len(names) > 8 else ""
        console.print(f"  failed, {len(names)} {kind}: {', '.join(names[:8])}{more}", highlight=False, markup=False)
    if failed and cached:
        console.print(f"  (each failure's evidence: {where}; --force rebuilds)", highlight=False, markup=False)


@app.command("list")
def list_cmd() -> None:
    """List FailAtlas sandboxes of every kind with their run and whether their owner process still runs."""
    from failatlas.bench_core.sandbox import SANDBOXES, SandboxError, sandbox_kind

    rows = []
    for name in SANDBOXES.names():
        try:
            rows += sandbox_kind(name).list_sandboxes()
        except SandboxError as exc:
            err_console.print(f"skipping {name} sandboxes: {exc}", highlight=False)
    if not rows:
        console.print("no sandboxes")
    for row in rows:
        console.print("\t".join(row[k] for k in ("name", "status", "run_id", "owner_pid", "owner_alive")))


@app.command()
def cleanup(
    all_: Annotated[
        bool, typer.Option("--all", help="Also remove sandboxes whose owner still runs.")
    ] = False,
    run_id: Annotated[str | None, typer.Option(help="Only the sandboxes of this run.")] = None,
) -> None:
    """Remove orphaned sandboxes of every kind (their owner process has died): containers and local folders."""
    from failatlas.bench_core.sandbox import SANDBOXES, SandboxError, sandbox_kind

    removed: dict[str, list[str]] = {}
    for name in SANDBOXES.names():
        try:
            removed[name] = sandbox_kind(name).clean_orphans(run_id=run_id, include_live=all_)
        except SandboxError as exc:
            err_console.print(f"skipping {name} sandboxes: {exc}", highlight=False)
    total = sum(len(v) for v in removed.values())
    by_kind = ", ".join(f"{name}: {len(v)}" for name, v in removed.items())
    console.print(f"removed {total} orphaned sandbox(es) ({by_kind})", highlight=False)
    for name, items in removed.items():
        for item in items:
            console.print(f"  {name}\t{item}", highlight=False)
    if run_id is None and "docker" in removed:  # the engine answered: the unpacked /usr of images it no longer has
        from failatlas.bench_core.sandbox import docker_system
        from failatlas.bench_core.sandbox.cleanup import docker_client

        folders = docker_system.remove_stale(docker_client())
        if folders:
            console.print(f"removed {len(folders)} unpacked image folder(s) of images Docker no longer has",
                          highlight=False)
        for folder in folders:
            console.print(f"  docker\t{folder}", highlight=False)


@app.command()
def gpus() -> None:
    """Show this host's GPUs and which run holds each."""
    from failatlas.bench_core.sandbox.gpus import GpuAllocator

    alloc = GpuAllocator()
    held = alloc.in_use()
    if not alloc.gpu_ids:
        console.print("no GPUs found (nvidia-smi -L / CUDA_VISIBLE_DEVICES)")
    for gpu in alloc.gpu_ids:
        h = held.get(gpu)
        console.print(f"GPU {gpu}\t" + (f"held by pid {h['pid']} {h.get('owner', '')} since {h['since']}"
                                         if h else "free"))

