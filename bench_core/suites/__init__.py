"""Task suites bundled with FailAtlas (`failatlas-mini`: small seeded CPU experiments with full truth)."""

from failatlas.bench_core.suites.loader import load_suite, load_task, suite_dir, suite_names

__all__ = ["load_suite", "load_task", "suite_dir", "suite_names"]
