"""Building a taxonomy snapshot from clusterings: merge near-duplicate clusters into failure types, name them,
group them into categories per phase, and record every member's type. One function, one transaction."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter

import numpy as np

from failatlas.core.errors import ConfigError
from failatlas.core.stages import StageRun, stage_run
from failatlas.core.store import Store
from failatlas.core.version import code_version
from failatlas.embed import Embedder, EmbeddingSet
from failatlas.ingest.kinds import UNKNOWN
from failatlas.taxonomy.assign import assign_by_phase
from failatlas.taxonomy.drafts import Draft, cluster_drafts, seeded_drafts
from failatlas.taxonomy.edits import apply_edits, load_edits
from failatlas.taxonomy.encoders import build_learner, fitted_definitions, prototype_encoder, seed_label
from failatlas.taxonomy.facets import (
    facet_categories,
    facet_label,
    faceted_drafts,
    load_facets,
    unknown_kind_types,
)
from failatlas.taxonomy.inputs import latest_clusterings, load_clustering, require_vectors
from failatlas.taxonomy.labelling import Labeller, make_labeller
from failatlas.taxonomy.labelling.readable import ReadableNames, is_honest
from failatlas.taxonomy.learned import learned_drafts, learning_key
from failatlas.taxonomy.model import (
    UNASSIGNED,
    BuildParams,
    FailureCategory,
    FailureType,
    LabelEffect,
    SeedReport,
    Taxonomy,
    phase_rank,
)
from failatlas.taxonomy.name_choice import NameSpace, distinct_labels, join_indistinct
from failatlas.taxonomy.naming import phase_categories, type_evidence, unique_names
from failatlas.taxonomy.read import load_taxonomy
from failatlas.taxonomy.scoped import label_effects, label_effects_of, learn_within_kinds
from failatlas.taxonomy.seed_joins import join_seed_duplicates, merge_same_category, variant_label
from failatlas.taxonomy.seeding import prototypes
from failatlas.taxonomy.writes import make_current, write_assignments, write_snapshot


def run(
    store: Store, params: BuildParams, *, labeller: Labeller | None = None, embedder: Embedder | None = None
) -> Taxonomy:
    """Build and store a taxonomy snapshot from `params.clustering_ids` (default: the newest clustering per
    phase), and record the run in `stage_runs`. A snapshot is named by what decides it (the clusterings, the
    parameters, the embedding set and the code version): when that snapshot exists already, it is returned as it
    is, nothing is labelled again and no second snapshot appears (`failatlas demo` re-run). A labeller passed as an
    object always makes a new snapshot, since its identity is not recorded.

    Clusters become failure types (near-duplicates merged), named by `labeller` (default: the one `params`
    names, given the store so that LLM calls are cached and logged), grouped into categories per phase; every
    clustered insight is recorded in `insight_failure_types` (outliers go to the nearest type or 'unassigned').
    Centroids come from the vectors of the embedding set the clusterings were made from. Raises NotFoundError
    when a clustering is missing, InputError when members lack vectors, ConfigError for inconsistent inputs or
    an unusable labeller.

    With `params.seed_taxonomy`, each phase's insights first join the seed category they are close enough to
    (a threshold calibrated on the phase's own cosines, reported in `Taxonomy.seed_reports`); those types keep
    the seed's names (origin 'seed'), and only the rest are clustered into types marked 'new'. Seed texts are
    embedded with the embedding set's model, or with `embedder` (which must be that model).

    Stored labels (and `params.examples`) teach only the phase and kind of the insights they were given on, and
    only where they name two categories there (taxonomy/scoped.py); `Taxonomy.label_effects` says what each
    label moved.

    With `params.fit_definitions` (opt-in), each offline or seed definition's representative insights are
    chosen among a fixed set of candidates so that names reconstruct their types (taxonomy/definitions.py); this
    needs the same model, and where it is not on this machine the definitions stay as labelled and the stage run
    notes why.
    """
    with stage_run(store, "taxonomy.build", params, seed=params.seed) as record:
        return _build(store, params, labeller, embedder, record)


def _build(
    store: Store, params: BuildParams, labeller: Labeller | None, embedder: Embedder | None, record: StageRun
) -> Taxonomy:
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    clustering_ids = list(params.clustering_ids) if params.clustering_ids else latest_clusterings(store)
    inputs = [load_clustering(store, c) for c in clustering_ids]
    sets = sorted({ci.embedding_set.id for ci in inputs})
    if len(sets) != 1:
        raise ConfigError(
            f"the clusterings use different embedding sets: {sets}",
            hint="build a taxonomy from clusterings of one embedding model, revision and normaliser",
        )
    embedding_set = inputs[0].embedding_set
    phases_seen = [ci.phase for ci in inputs]
    if len(set(phases_seen)) != len(phases_seen):
        raise ConfigError(f"two clusterings cover the same phase: {phases_seen}", hint="pass one per phase")
    key = [clustering_ids, params.model_dump(mode="json", exclude={"clustering_ids"}), embedding_set.id,
           code_version()]
    edits = load_edits(store)
    if edits:  # saved edits shape the snapshot too
        key.append([e.model_dump(mode="json") for e in edits])
    if learned_from := learning_key(store, params.examples, params.use_labels):  # examples, labels
        key.append(learned_from)
    if labeller is not None:
        key.append(started.isoformat())  # a labeller object's identity is not recorded: always a new snapshot
    taxonomy_id = "tx-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    if store.query("SELECT 1 FROM taxonomies WHERE id = ?", [taxonomy_id]):
        make_current(store, taxonomy_id)  # built again (a label removed, say): it is the current one again
        record.note(taxonomy_id=taxonomy_id, reused=True, made_current=True)
        return load_taxonomy(store, taxonomy_id).model_copy(
            update={"stage_run_id": record.id, "label_effects": label_effects_of(store, taxonomy_id)})
    labeller = ReadableNames(labeller) if labeller else make_labeller(params.labeller, store=store,
                                                                     **params.labeller_args)

    drafts: list[Draft] = []
    outliers: list[tuple[str, str, np.ndarray]] = []  # (insight_id, phase, vector)
    encode = None
    reports: dict[str, SeedReport] = {}
    content: dict[str, tuple[str, np.ndarray]] = {}
    member_vectors: list[tuple[list[str], np.ndarray]] = []  # (insight ids, their vectors) per clustering
    learner = build_learner(store, params, embedding_set, embedder)
    facets = load_facets(store, [i for ci in inputs for i in ci.members["insight_id"].to_list()])
    placed: dict[str, str] = {}  # outliers placed in a type of their kind: insight id -> method
    effects: list[LabelEffect] = []
    joins: list[dict] = []  # new types merged into the seed category they duplicate
    for ci in inputs:
        vectors = require_vectors(store, ci.members["text"].to_list(), embedding_set, f"insights of {ci.id}")
        whole, whole_vectors = ci, vectors
        member_vectors.append((ci.members["insight_id"].to_list(), vectors))
        if edits:
            content.update(zip(ci.members["insight_id"].to_list(), zip(ci.members["text"].to_list(), vectors,
                                                                           strict=True), strict=True))
        phase = ci.phase or Counter(ci.members["phase"].to_list()).most_common(1)[0][0]
        seed_categories = params.seed_taxonomy.categories_for(phase) if params.seed_taxonomy else []
        free_text = all(facets.of(i) == UNKNOWN for i in ci.members["insight_id"].to_list())
        phase_drafts: list[Draft] = []
        if learner is not None and free_text and learner.learns(phase):
            seeded, ci, vectors, reports[phase] = learned_drafts(ci, vectors, params, learner)
            phase_drafts.extend(seeded)
            effects += label_effects(learner, phase, UNKNOWN, seeded)
            seed_categories = seed_categories or [d.seed_category for d in seeded]
        elif seed_categories:
            encode = encode or prototype_encoder(embedding_set, embedder)
            seeded, ci, vectors, reports[phase] = seeded_drafts(
                ci, vectors, params, seed_categories, prototypes(seed_categories, encode)
            )
            phase_drafts.extend(seeded)
        found, out_rows = cluster_drafts(ci, vectors, params)
        if seed_categories:  # a 'new' type is a failure seen at least twice; single leftovers are outliers
            row_of = {i: r for r, i in enumerate(ci.members["insight_id"].to_list())}
            single = [row_of[d.insight_ids[0]] for d in found if len(d.insight_ids) < 2]
            found = [d for d in found if len(d.insight_ids) >= 2]
            out_rows = np.concatenate([np.asarray(out_rows, dtype=int), np.asarray(single, dtype=int)])
        for d in found:
            d.origin = "new" if seed_categories else "cluster"
        found, out_rows = faceted_drafts(found, out_rows, ci, vectors, facets, placed)
        phase_drafts.extend(found)
        out_ids = [ci.members["insight_id"][int(r)] for r in out_rows]
        if learner is not None and free_text and not learner.learns(phase):
            effects += label_effects(learner, phase, UNKNOWN, [])
        elif learner is not None and not free_text:  # learned within each kind, after the build without labels
            phase_drafts, out_ids, found_effects = learn_within_kinds(phase_drafts, out_ids, whole, whole_vectors,
                                                                      phase, facets, params, learner)
            effects += found_effects
        if any(d.seed_category is not None for d in phase_drafts):  # a new type the seed has already joins it
            phase_drafts, merged = merge_same_category(phase_drafts, whole.members["insight_id"].to_list(),
                                                       whole.members["text"].to_list(), whole_vectors, facets)
            joins += merged
            phase_drafts, found_joins = join_seed_duplicates(phase_drafts, whole.members["insight_id"].to_list(),
                                                             whole.members["text"].to_list(), whole_vectors, facets,
                                                             join=params.seed_taxonomy is not None)
            joins += found_joins
            if found_joins and phase in reports:  # what joined a seed type is explained by the seed too
                reports[phase] = reports[phase].model_copy(update={
                    "n_explained": reports[phase].n_explained + sum(j["n_insights"] for j in found_joins)})
        drafts.extend(phase_drafts)
        row_of = {i: r for r, i in enumerate(whole.members["insight_id"].to_list())}
        outliers.extend((i, whole.members["phase"][row_of[i]], whole_vectors[row_of[i]]) for i in out_ids)
    if params.seed_taxonomy is not None or learner is not None:
        record.note(seed=params.seed_taxonomy.name if params.seed_taxonomy else None,
                    seed_reports=[r.model_dump() for r in reports.values()], seed_joins=joins)
    if learner is not None:
        record.note(learned=learner.notes, label_effects=[e.model_dump() for e in effects])

    types: list[FailureType] = []
    categories: list[FailureCategory] = []
    vectors = NameSpace(member_vectors, embedding_set, embedder)
    renamed: list[dict] = []
    joined: list[dict] = []  # types a reader could not tell apart from another by any name, joined to it
    heads: dict[str, str | None] = {}
    members: dict[str, tuple[list[str], list[str]]] = {}
    records: list[tuple[str, str, float | None, str]] = []  # (type id, insight id, cosine, method)
    for phase in sorted({d.phase for d in drafts}, key=lambda p: (phase_rank(p), p)):
        mine = [d for d in drafts if d.phase == phase]
        while True:  # named; a type no name of its own tells apart from another's joins it, and all are named again
            mine = sorted(mine, key=lambda d: (-len(d.insight_ids), d.merged_from))
            type_ids = [f"{phase}/T{n:02d}" for n in range(1, len(mine) + 1)]
            evidence = type_evidence(mine, type_ids)
            labels = [
                seed_label(d, ev, params, d.report or reports[phase]) if d.seed_category is not None else
                labeller.label(ev)
                for d, ev in zip(mine, evidence, strict=True)
            ]
            own = [lab.name for lab in labels]
            labels = [lab if d.seed_category is not None else variant_label(facet_label(lab, d, facets), d)
                      for d, lab in zip(mine, labels, strict=True)]
            free = [d.seed_category is None and lab.name == name and not is_honest(name)
                    for d, lab, name in zip(mine, labels, own, strict=True)]
            labels, chosen = distinct_labels(mine, evidence, labels, own, labeller, vectors.of, vectors.encoder())
            mine, notes = join_indistinct(mine, [lab.name for lab in labels], free, vectors, params.n_keywords)
            if not notes:
                break
            joined += notes
        renamed += chosen
        names = unique_names([lab.name for lab in labels], [d.keywords for d in mine])
        cats, cat_ids = phase_categories(phase, mine, labels, names, labeller, params)
        cats, cat_ids = facet_categories(phase, mine, facets, cats, cat_ids)  # by kind, where all types have one
        categories.extend(cats)
        rule = (
            f"Later insights: closer to this type's centroid than to any other {phase} type's, with cosine at "
            f"least {params.assign_threshold:.2f}."
        )
        for type_id, d, lab, name, cat in zip(type_ids, mine, labels, names, cat_ids, strict=True):
            heads[type_id], members[type_id] = lab.definition_head, (d.insight_ids, d.texts)
            types.append(
                FailureType(
                    id=type_id,
                    phase=phase,
                    category_id=cat,
                    name=name,
                    definition=lab.definition,
                    inclusion_criteria=[*lab.inclusion_criteria, rule],
                    examples=lab.examples,
                    keywords=d.keywords,
                    centroid=[float(x) for x in d.centroid],
                    n_insights=len(d.insight_ids),
                    merged_from=d.merged_from,
                    naming_method=lab.naming_method,
                    prompt=lab.prompt,
                    raw_reply=lab.raw_reply,
                    origin=d.origin,
                )
            )
            records += [
                (type_id, i, float(s), placed.get(i, "cluster"))
                for i, s in zip(d.insight_ids, d.similarities, strict=True)
            ]

    record.note(names_chosen=vectors.note(renamed), indistinct_joins=joined)
    if outliers:
        by_phase = {}
        for t in unknown_kind_types(types, members, facets):  # outliers left are of unknown kind
            ids, cents = by_phase.setdefault(t.phase, ([], []))
            ids.append(t.id)
            cents.append(t.centroid)
        centroids = {p: (ids, np.asarray(c, dtype=np.float32)) for p, (ids, c) in by_phase.items()}
        out_ids, out_sims = assign_by_phase(
            [o[1] for o in outliers], np.stack([o[2] for o in outliers]), centroids, params.assign_threshold
        )
        records += [
            (
                t,
                o[0],
                None if np.isnan(s) else float(s),
                "nearest_centroid" if t != UNASSIGNED else UNASSIGNED,
            )
            for o, t, s in zip(outliers, out_ids, out_sims, strict=True)
        ]
    if params.fit_definitions and types:
        types = fitted_definitions(types, heads, members, records, member_vectors, embedding_set, embedder, record)
    edit_notes: list[str] = []
    if edits:
        types, records, edit_notes = apply_edits(
            edits, types, records,
            lambda ids: ([content[i][0] for i in ids], np.stack([content[i][1] for i in ids])),
        )
        record.note(edits=edit_notes)
    labelled_by = getattr(labeller, "made_by", {}) or {}  # an LLM labeller's model and host; {} offline
    return _store_snapshot(store, record, taxonomy_id, clustering_ids, embedding_set, params, started, categories,
                           types, records, list(reports.values()), labelled_by,
                           ).model_copy(update={"edit_notes": edit_notes, "label_effects": effects})

def _store_snapshot(
    store: Store,
    record: StageRun,
    taxonomy_id: str,
    clustering_ids: list[str],
    embedding_set: EmbeddingSet,
    params: BuildParams,
    started: dt.datetime,
    categories: list[FailureCategory],
    types: list[FailureType],
    records: list[tuple[str, str, float | None, str]],
    seed_reports: list[SeedReport],
    labelled_by: dict[str, str],
) -> Taxonomy:
    version_code = code_version()
    n_unassigned = sum(1 for r in records if r[0] == UNASSIGNED)
    with store.write() as conn:
        version = write_snapshot(
            conn, taxonomy_id=taxonomy_id, clustering_ids=clustering_ids, embedding_set_id=embedding_set.id,
            embed_model=embedding_set.model, normalisation=embedding_set.normalisation,
            params_json=params.model_dump_json(), code_version=version_code, created_at=started,
            categories=categories, types=types, seed_reports=seed_reports, labelled_by=labelled_by,
        )
        write_assignments(store, [(taxonomy_id, iid, tid, s, m) for tid, iid, s, m in records])
        record.count("taxonomies", 1)
        record.count("failure_categories", len(categories))
        record.count("failure_types", len(types))
        record.count("insight_failure_types", len(records))
        record.note(taxonomy_id=taxonomy_id, version=version, n_assigned=len(records) - n_unassigned,
                    n_unassigned=n_unassigned, embedding_set_id=embedding_set.id)
        record.id = f"taxonomy.build:{taxonomy_id}"  # a build's run is named after its snapshot
        record.record(conn)
    return Taxonomy(
        id=taxonomy_id,
        version=version,
        clustering_ids=clustering_ids,
        embed_model=embedding_set.model,
        normalisation=embedding_set.normalisation,
        embedding_set_id=embedding_set.id,
        params=params,
        code_version=version_code,
        categories=categories,
        types=types,
        n_assigned=len(records) - n_unassigned,
        n_unassigned=n_unassigned,
        seed_reports=seed_reports,
        labelled_by=labelled_by,
        stage_run_id=record.id,
    )
