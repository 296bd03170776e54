"""Taxonomy: from clusters of failure insights to the table a paper prints.

Name failure types (offline c-TF-IDF or an LLM with contrastive prompts), merge near-duplicates, group them
into categories per phase, assign new insights without re-clustering, compute prevalence with bootstrap CIs
and export LaTeX / Markdown / CSV tables and figures. Every function works over the store's tables.
"""

from taxonomy.assign import AssignSummary, assign_insights, nearest_centroid
from taxonomy.build import build_taxonomy
from taxonomy.export import FORMATS, ExportResult, export_taxonomy
from taxonomy.funnel import funnel
from taxonomy.keywords import class_tfidf
from taxonomy.labelling import LABELLERS, Labeller, StructuredLLM, make_labeller, register_labeller
from taxonomy.merge import merge_groups
from taxonomy.model import UNASSIGNED, BuildParams, FailureCategory, FailureType, Taxonomy, TypeEvidence
from taxonomy.prevalence import prevalence, prevalence_table
from taxonomy.read import list_taxonomies, load_taxonomy

__all__ = [
    "FORMATS",
    "LABELLERS",
    "UNASSIGNED",
    "AssignSummary",
    "BuildParams",
    "ExportResult",
    "FailureCategory",
    "FailureType",
    "Labeller",
    "StructuredLLM",
    "Taxonomy",
    "TypeEvidence",
    "assign_insights",
    "build_taxonomy",
    "class_tfidf",
    "export_taxonomy",
    "funnel",
    "list_taxonomies",
    "load_taxonomy",
    "make_labeller",
    "merge_groups",
    "nearest_centroid",
    "prevalence",
    "prevalence_table",
    "register_labeller",
]
