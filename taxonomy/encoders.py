"""What a build encodes with and learns from (split from build.py): the seed's texts in the clusterings'
embedding space, the classifier of a build with labelled examples or stored labels, a seed type's label, and
definitions fitted to reconstruct their types."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from failatlas.core.errors import ConfigError
from failatlas.core.stages import StageRun
from failatlas.core.store import Store
from failatlas.embed import Embedder, EmbeddingSet
from failatlas.taxonomy.definitions import fit_type_definitions, with_examples
from failatlas.taxonomy.drafts import Draft
from failatlas.taxonomy.learned import Learner, learned_criterion, make_learner
from failatlas.taxonomy.model import BuildParams, FailureType, SeedReport, TypeEvidence, TypeLabel


def prototype_encoder(embedding_set: EmbeddingSet, embedder: Embedder | None) -> Callable[[list[str]], np.ndarray]:
    """Encodes seed texts into the embedding set's space: its model (or `embedder`), its normaliser. Raises
    ConfigError when `embedder` is another model than the set's."""
    from failatlas.embed import get_embedder, normaliser_named

    model = embedder or get_embedder(embedding_set.model)
    if model.model != embedding_set.model:
        raise ConfigError(
            f"the seed would be embedded with '{model.model}' but the clusterings use '{embedding_set.model}'",
            hint="pass the embedder of the clusterings' embedding set",
        )
    normaliser = normaliser_named(embedding_set.normalisation)
    return lambda texts: model.encode(normaliser(texts))


def build_learner(store: Store, params: BuildParams, embedding_set: EmbeddingSet, embedder: Embedder | None
             ) -> Learner | None:
    """The classifier of a build that has labelled examples or stored labels to learn from; None otherwise."""
    encoders: list[Callable[[list[str]], np.ndarray]] = []  # made on first use: loads the model

    def encode(texts: list[str]) -> np.ndarray:
        encoders or encoders.append(prototype_encoder(embedding_set, embedder))
        return encoders[0](texts)

    return make_learner(store, params.seed_taxonomy, params.examples, params.use_labels, params.label_threshold,
                        embedding_set, encode)


def seed_label(d: Draft, evidence: TypeEvidence, params: BuildParams, report: SeedReport) -> TypeLabel:
    """A seed type keeps the seed's name and definition; its examples are its most central insights."""
    from failatlas.taxonomy.labelling.offline import examples_of

    category = d.seed_category
    assert category is not None
    head = f"{category.definition} Here"
    return TypeLabel(
        name=category.name,
        definition=with_examples(head, evidence.texts),
        definition_head=head,
        inclusion_criteria=[
            learned_criterion(params, report) if report.method == "learned" else
            f"Nearest category of the seed '{params.seed_taxonomy.name}', with cosine to its prototype (name,"
            f" definition, examples) at least {report.threshold:.3f}: the {report.null_quantile:.2f} quantile of"
            " this phase's cosines to categories that are not an insight's nearest."
        ],
        examples=examples_of(evidence, params.n_examples),
        naming_method="seed",
    )



def fitted_definitions(
    types: list[FailureType],
    heads: dict[str, str | None],
    members: dict[str, tuple[list[str], list[str]]],
    records: list[tuple[str, str, float | None, str]],
    member_vectors: list[tuple[list[str], np.ndarray]],
    embedding_set: EmbeddingSet,
    embedder: Embedder | None,
    record: StageRun,
) -> list[FailureType]:
    """`types` with definitions fitted to reconstruct them (taxonomy/definitions.py), noted in the stage run; as
    they are, with the reason noted, where the embedding model is not on this machine."""
    from failatlas.core.errors import MissingDependencyError, NotFoundError

    try:
        encode = prototype_encoder(embedding_set, embedder)
        dims = (np.asarray(encode([types[0].name])).shape[1], member_vectors[0][1].shape[1])
    except (NotFoundError, MissingDependencyError) as exc:
        record.note(definitions_fitted=False, definitions_not_fitted_because=str(exc))
        return types
    if dims[0] != dims[1]:  # the stored vectors were not made by this model as it is here
        record.note(definitions_fitted=False, definitions_not_fitted_because=f"the model '{embedding_set.model}'"
                    f" gives {dims[0]} dimensions, the embedding set {dims[1]}")
        return types
    row_of = {}
    for block, (ids, _) in enumerate(member_vectors):
        row_of.update({iid: (block, r) for r, iid in enumerate(ids)})

    def vector_of(ids: list[str]) -> np.ndarray:
        return np.stack([member_vectors[row_of[i][0]][1][row_of[i][1]] for i in ids])

    fitted, fidelity = fit_type_definitions(types, heads, members, records, vector_of, encode)
    record.note(definitions_fitted=True, name_fidelity_before_after=fidelity)
    return fitted
