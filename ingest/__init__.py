"""Raw failure insights: from our own runs (judges, monitor, validator) and from other tools' files.

Two stage entries, each `run_x(store, XParams) -> IngestResult` recording one `stage_runs` row:
`run_file` (`ingest.file`) and `run_runs` (`ingest.runs`).
"""

from failatlas.ingest.files import run_file
from failatlas.ingest.importers import INSIGHT_IMPORTERS
from failatlas.ingest.llm_extractor import LLMExtractor
from failatlas.ingest.model import (
    PHASES,
    FileIngestParams,
    IngestResult,
    RawInsight,
    RunsIngestParams,
    insight_id,
    normalise_text,
)
from failatlas.ingest.runs import run_runs
from failatlas.ingest.sentences import error_sentences, split_sentences
from failatlas.ingest.signatures import SIGNATURE_PATTERNS, Signature, error_signatures
from failatlas.ingest.stats import insight_stats

__all__ = [
    "INSIGHT_IMPORTERS",
    "PHASES",
    "SIGNATURE_PATTERNS",
    "FileIngestParams",
    "IngestResult",
    "LLMExtractor",
    "RawInsight",
    "RunsIngestParams",
    "Signature",
    "error_sentences",
    "error_signatures",
    "insight_id",
    "insight_stats",
    "normalise_text",
    "run_file",
    "run_runs",
    "split_sentences",
]
