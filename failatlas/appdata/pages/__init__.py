"""One module per page of the explorer, each with `render(ctx)`; `PAGES` maps the `?page=` value to its title and
a `render` that imports the page's module when the page is first shown, so a page load imports only what that page
uses (issue 54: the first page once imported every page's modules, and through them every stage)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def _lazy(module: str) -> Callable[[Any], None]:
    def render(ctx: Any) -> None:
        importlib.import_module(f"failatlas.appdata.pages.{module}").render(ctx)

    render.__qualname__ = f"{module}.render"
    return render


# `?page=` value: (title, the page's module)
MODULES = {"overview": ("Overview", "overview"), "runs": ("Runs", "runs"), "task": ("Task", "task_view"),
           "diff": ("Run diff", "run_diff"), "taxonomy": ("Taxonomy", "taxonomy_view"),
           "drill": ("Drill-down", "drill"), "map": ("Map", "map_view"), "compare": ("Compare", "compare")}
PAGES: dict[str, tuple[str, Callable[[Any], None]]] = {key: (title, _lazy(module))
                                                       for key, (title, module) in MODULES.items()}

__all__ = ["MODULES", "PAGES"]
