"""One module per page of the explorer, each with `render(ctx)`; `PAGES` maps the `?page=` value to it."""

from failatlas.appdata.pages import compare, drill, map_view, overview, run_diff, runs, task_view, taxonomy_view

PAGES = {
    "overview": ("Overview", overview.render),
    "runs": ("Runs", runs.render),
    "task": ("Task", task_view.render),
    "diff": ("Run diff", run_diff.render),
    "taxonomy": ("Taxonomy", taxonomy_view.render),
    "drill": ("Drill-down", drill.render),
    "map": ("Map", map_view.render),
    "compare": ("Compare", compare.render),
}

__all__ = ["PAGES"]
