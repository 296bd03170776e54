"""The shape of the code: one installable namespace, layers that only point down, no import cycles.

The wheel is built from the files a clone has (tracked and untracked-but-not-ignored), and import-linter runs on it:
in the wheel every stage sits physically under `failatlas/`, which is what users install."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("bench_core", "ingest", "embed", "cluster", "taxonomy")
OLD_TOP_LEVEL = re.compile(r"^\s*(from|import)\s+(app|bench_core|ingest|embed|cluster|taxonomy)(\.|\s|$)", re.M)


def _clone_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [f for f in out.splitlines() if (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel --no-deps .` on a copy of the clone's files (no build folders left in the checkout)."""
    src = tmp_path_factory.mktemp("src")
    for name in _clone_files():
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                    "-w", str(out)], check=True, capture_output=True, text=True)
    (built,) = out.glob("failatlas-*.whl")
    return built


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    return target


def test_wheel_holds_only_the_failatlas_package(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    dist_info = [t for t in tops if t.endswith(".dist-info")]
    assert len(dist_info) == 1 and dist_info[0].startswith("failatlas-")
    assert tops - set(dist_info) == {"failatlas"}, sorted(tops)
    for stage in STAGES:
        assert f"failatlas/{stage}/__init__.py" in names, stage
    assert "failatlas/appdata/main.py" in names  # the app's script, without a top-level `app` module
    assert "failatlas/bench_core/suites/mini/ridge-cv/task.yaml" in names  # package data travels too
    assert "failatlas/bench_core/images/Dockerfile" in names
    with zipfile.ZipFile(wheel) as zf:
        record = zf.read(f"{dist_info[0]}/RECORD").decode()
        entry_points = zf.read(f"{dist_info[0]}/entry_points.txt").decode()
    assert "app.py" not in {line.split(",")[0] for line in record.splitlines()}
    assert "failatlas = failatlas.cli:main" in entry_points


def test_every_source_folder_is_in_the_wheel(wheel: Path):
    """A stage subpackage without an `__init__.py` would be silently left out of the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for stage in ("failatlas", *STAGES):
        for py in (ROOT / stage).rglob("*.py"):
            rel = py.relative_to(ROOT)
            if "__pycache__" in rel.parts or "suites" in rel.parts:
                continue
            installed = rel.as_posix() if stage == "failatlas" else f"failatlas/{rel.as_posix()}"
            assert installed in names, f"{rel} is not in the wheel (missing __init__.py above it?)"


def test_import_contracts_hold_on_the_installed_tree():
    """The README's command for the contracts (scripts/lint_imports.sh: import-linter on the built wheel)."""
    result = subprocess.run(["bash", str(ROOT / "scripts" / "lint_imports.sh")], capture_output=True, text=True)
    assert "Contracts: " in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " 0 broken" in result.stdout


def test_the_layers_contract_covers_every_module_of_the_package(unpacked: Path):
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    named = {part.strip() for layer in layers for part in re.split(r"[|:]", layer)}
    children = {p.stem for p in (unpacked / "failatlas").iterdir() if p.suffix == ".py" or p.is_dir()}
    children -= {"__init__", "__pycache__"}
    assert children <= named, f"not in any layer: {sorted(children - named)}"


def test_no_code_imports_the_old_top_level_names():
    offenders = []
    for name in _clone_files():
        if not name.endswith(".py") or "/suites/" in name:
            continue
        text = (ROOT / name).read_text(encoding="utf-8")
        offenders += [f"{name}: {m.group(0).strip()}" for m in OLD_TOP_LEVEL.finditer(text)]
    assert not offenders, offenders


def test_an_installed_failatlas_resolves_stages_inside_the_namespace():
    import failatlas.cluster
    import failatlas.taxonomy

    assert Path(failatlas.cluster.__file__).resolve() == ROOT / "cluster" / "__init__.py"
    assert Path(failatlas.taxonomy.__file__).resolve() == ROOT / "taxonomy" / "__init__.py"
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('cluster'))"],
                           cwd="/", capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "None"  # nothing named `cluster` is installed at the top level


def _product_files() -> list[Path]:
    roots = ("failatlas", *STAGES)
    return [ROOT / f for f in _clone_files() if f.endswith(".py") and f.split("/", 1)[0] in roots]


def _ours(module: str) -> bool:  # failatlas_wire and the like are the sandbox's own modules, not the package
    return module == "failatlas" or module.startswith("failatlas.")


def test_every_import_of_the_project_names_a_module_and_names_that_exist():
    """Imports inside functions (kept lazy for the CLI's start-up) run only when their path does: a module moved in
    a reshape leaves them pointing nowhere, unseen by lint. Every `from failatlas.X import a, b` anywhere in the
    product must resolve: X imports and has a and b (a submodule counts)."""
    import ast
    import importlib

    broken = []
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
                module, names = node.module, [a.name for a in node.names if a.name != "*"]
            elif isinstance(node, ast.Import):
                module, names = None, [a.name for a in node.names if _ours(a.name)]
            else:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            try:
                if module is None:
                    for name in names:
                        importlib.import_module(name)
                    continue
                loaded = importlib.import_module(module)
            except ImportError as exc:
                broken.append(f"{where}: {exc}")
                continue
            for name in names:
                if not hasattr(loaded, name):
                    try:
                        importlib.import_module(f"{module}.{name}")
                    except ImportError:
                        broken.append(f"{where}: {module} has no {name}")
    assert not broken, "\n".join(broken)
