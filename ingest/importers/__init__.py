"""Importers of other tools' insight files, each registered by format name in `INSIGHT_IMPORTERS`.

Adding a format: a module whose importer class registers itself with `@INSIGHT_IMPORTERS.register(name)`
(see `failatlas.core.importers` for the shape), plus its import line here.
"""

from failatlas.ingest.importers import expbench, generic, inspect_log, trail  # noqa: F401  (they register)
from failatlas.ingest.importers.base import INSIGHT_IMPORTERS

__all__ = ["INSIGHT_IMPORTERS"]
