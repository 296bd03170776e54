"""Taxonomy: from clusters of failure insights to the table a paper prints.

Name failure types (offline c-TF-IDF or an LLM with contrastive prompts), merge near-duplicates, group them
into categories per phase, assign new insights without re-clustering, compute prevalence with Wilson CIs
and export LaTeX / Markdown / CSV tables and figures. Every function works over the store's tables.

    taxonomy = failatlas.taxonomy.run(store, BuildParams(labeller="offline"))
"""

from failatlas.taxonomy.assign import AssignSummary, assign_insights, nearest_centroid
from failatlas.taxonomy.build import run
from failatlas.taxonomy.export import ExportResult, export_formats, export_taxonomy
from failatlas.taxonomy.funnel import funnel
from failatlas.taxonomy.keywords import class_tfidf
from failatlas.taxonomy.labelling import LABELLERS, Labeller, make_labeller, register_labeller
from failatlas.taxonomy.merge import merge_groups
from failatlas.taxonomy.model import UNASSIGNED, BuildParams, FailureCategory, FailureType, Taxonomy, TypeEvidence
from failatlas.taxonomy.prevalence import prevalence, prevalence_table
from failatlas.taxonomy.read import list_taxonomies, load_taxonomy

__all__ = [
    "LABELLERS",
    "UNASSIGNED",
    "AssignSummary",
    "BuildParams",
    "ExportResult",
    "FailureCategory",
    "FailureType",
    "Labeller",
    "Taxonomy",
    "TypeEvidence",
    "assign_insights",
    "class_tfidf",
    "export_formats",
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
    "run",
]
