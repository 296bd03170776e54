#!/usr/bin/env bash
# The import contracts of pyproject.toml (layers, no cycles, no old top-level names) checked with import-linter on
# the installed layout: the stages live in root folders that only the wheel puts under failatlas/ (setup.py), so
# `lint-imports` in the clone itself cannot find failatlas.ingest. This builds the wheel from the clone's files
# (tracked and untracked-but-not-ignored) in a temporary folder, unpacks it and runs import-linter there.
# Usage: bash scripts/lint_imports.sh   (exit 0 when every contract holds)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/wheel" "$work/unpacked"
(cd "$root" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
  [ -f "$f" ] && install -D -m 644 "$f" "$work/src/$f"; done)
python3 -m pip wheel -q --no-deps --no-build-isolation "$work/src" -w "$work/wheel" >/dev/null
python3 -m zipfile -e "$work"/wheel/failatlas-*.whl "$work/unpacked"
cd "$work/unpacked"
PYTHONPATH="$work/unpacked" python3 -c 'import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c(["--config", sys.argv[1], "--no-cache"]))' "$root/pyproject.toml"
