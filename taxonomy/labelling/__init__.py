"""Labellers name failure types: `offline` (c-TF-IDF keywords and the most central insight) and `llm`
(contrastive prompt, schema-checked reply). Pick one by name with `make_labeller`."""

from failatlas.taxonomy.labelling.base import LABELLERS, Labeller, make_labeller, register_labeller
from failatlas.taxonomy.labelling.llm import LLMLabeller, labeller_client
from failatlas.taxonomy.labelling.offline import OfflineLabeller, readable_name

__all__ = [
    "LABELLERS",
    "LLMLabeller",
    "Labeller",
    "OfflineLabeller",
    "labeller_client",
    "make_labeller",
    "readable_name",
    "register_labeller",
]
