#!/usr/bin/env bash
# Set up a fresh machine for FailAtlas: system packages, the Python package with its extras, the sandbox image.
# Idempotent: re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# pdflatex, and what the paper tables' preamble loads (README, "Paper tables"): cmap, booktabs, tabularx and caption
# (texlive-latex-base and -recommended) and lmodern's vector T1 fonts (its own package, only a recommendation of
# texlive's, so --no-install-recommends left it out and "\usepackage{lmodern}" stopped with "lmodern.sty not found")
command -v pdflatex >/dev/null 2>&1 || need_apt+=(texlive-latex-base)
if ! command -v kpsewhich >/dev/null 2>&1 || ! kpsewhich cmap.sty booktabs.sty caption.sty >/dev/null 2>&1; then
  need_apt+=(texlive-latex-recommended)
fi
if ! command -v kpsewhich >/dev/null 2>&1 || ! kpsewhich lmodern.sty >/dev/null 2>&1; then
  need_apt+=(lmodern)
fi
# pdftotext: the LaTeX tests read the compiled PDF's text as a reader sees it
command -v pdftotext >/dev/null 2>&1 || need_apt+=(poppler-utils)
# bwrap sandboxes (hosts without Docker): bubblewrap, and the system python3's numpy, scikit-learn and pytest that
# the mini-suite's CPU tasks need there (a sandbox sees the host's /usr read-only, never a user's own Python)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# strace: the provenance of the agent's commands under bwrap, traced from the host (Docker images carry their own)
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import numpy, sklearn, pytest' >/dev/null 2>&1; then
  need_apt+=(python3-numpy python3-sklearn python3-pytest)
fi
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing system packages: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

echo "== installing failatlas and its extras (PyTorch comes with sentence-transformers: the first time takes minutes)"
python3 -m pip install -q -e '.[all]'

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 \
   && python3 -m failatlas sandbox --help >/dev/null 2>&1; then
  echo "== building the sandbox image offline, and where Docker reads through FUSE its /usr for binds (each once)"
  python3 -m failatlas sandbox build-image
fi
echo "== compiling UMAP's numba code into numba's file cache (once; a first clustering then need not)"
python3 -c "from failatlas.cluster.warmup import precompile; precompile()" 2>/dev/null || echo "   (skipped: mining extra missing)"
echo "== ready: run 'failatlas demo'"
