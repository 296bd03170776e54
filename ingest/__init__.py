"""Raw failure insights: from our own runs (judges, monitor, validator) and from other tools' files."""

from failatlas.ingest.importers import FORMATS, IMPORTERS, detect_format, import_insights, parse_file
from failatlas.ingest.llm_extractor import LLMExtractor
from failatlas.ingest.model import PHASES, IngestReport, RawInsight, insight_id, normalise_text
from failatlas.ingest.runs import extract_from_runs
from failatlas.ingest.sentences import error_sentences, split_sentences
from failatlas.ingest.signatures import SIGNATURE_PATTERNS, Signature, error_signatures
from failatlas.ingest.stats import insight_stats

__all__ = [
    "FORMATS",
    "IMPORTERS",
    "PHASES",
    "SIGNATURE_PATTERNS",
    "IngestReport",
    "LLMExtractor",
    "RawInsight",
    "Signature",
    "detect_format",
    "error_sentences",
    "error_signatures",
    "extract_from_runs",
    "import_insights",
    "insight_id",
    "insight_stats",
    "normalise_text",
    "parse_file",
    "split_sentences",
]
