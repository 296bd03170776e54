"""Numba's on-disk cache for UMAP and PyNNDescent, so a new process does not compile them again.

umap-learn 0.5 marks few of its numba functions `cache=True`; every fresh process compiles the rest (about
10-40 s on 2 cores, more under load) before the first fit: the floor of a re-run in a new process. Numba's
dispatchers can be switched to its file cache before their first call, which is what `enable_numba_cache`
does for every jitted function of `umap` and `pynndescent`. Numba keys each cached entry by the function's
source file (path and modification time), its signature and the CPU, so an upgraded package or another machine
compiles afresh instead of loading stale code. Entries go where numba puts them: `__pycache__` beside the
package when writable, else the user's cache folder, or `NUMBA_CACHE_DIR` when set.

`FAILATLAS_NUMBA_CACHE=0` turns this off.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
import warnings

_lock = threading.Lock()
_done = False
_enabled = 0
_dispatchers: list = []
# modules that import optional extras (tensorflow, bokeh, ...) or hold only tests
_SKIP = ("tests", "plot", "parametric", "aligned", "validation")


def _iter_modules(package):  # noqa: ANN001, ANN202
    yield package
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if any(part in info.name for part in _SKIP):
            continue
        try:
            yield importlib.import_module(info.name)
        except Exception:  # an optional extra is missing: its functions are never called by us
            continue


def enable_numba_cache() -> int:
    """Switch every not-yet-cached numba function of umap and pynndescent to numba's file cache (once per
    process; later calls return at once). Returns how many functions were switched in this process."""
    global _done, _enabled
    if _done:
        return _enabled
    with _lock:
        if _done:
            return _enabled
        _done = True
        if os.environ.get("FAILATLAS_NUMBA_CACHE", "1") == "0":
            return 0
        try:
            import pynndescent
            import umap
            from numba.core.caching import NullCache
            from numba.core.errors import NumbaWarning
            from numba.core.registry import CPUDispatcher
        except ImportError:
            return 0
        # functions taking another jitted function as an argument cannot be cached: numba says so at each save
        warnings.filterwarnings("ignore", message="Cannot cache compiled function", category=NumbaWarning)
        for package in (umap, pynndescent):
            for module in _iter_modules(package):
                for obj in list(vars(module).values()):
                    # only functions not compiled yet: a cache switched on after compiling would miss them
                    if isinstance(obj, CPUDispatcher) and isinstance(obj._cache, NullCache) and not obj.overloads:
                        obj.enable_caching()
                        _dispatchers.append(obj)
                        _enabled += 1
        return _enabled


def numba_cache_stats() -> dict[str, int]:
    """Over the functions switched in this process: compiled signatures loaded from the file cache (`hits`)
    and compiled afresh (`misses`, each then written to the cache)."""
    hits = sum(sum(d.stats.cache_hits.values()) for d in _dispatchers)
    misses = sum(sum(d.stats.cache_misses.values()) for d in _dispatchers)
    return {"functions": _enabled, "hits": hits, "misses": misses}
