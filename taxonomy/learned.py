"""Seeds that learn from labelled examples: a classifier trained on labelled statements assigns insights to the
scheme's categories, with a calibrated confidence; insights below the threshold are left to clustering.

Training rows come from three places: the files passed as `taxonomy build --examples` (any format `ingest file`
reads; their texts are embedded for training and never stored as insights), the seed's own categories (name,
`name: definition` and examples), and the labels a person gave (`failatlas label`, table `insight_labels`).
Labels imported data carries (`insight_sources.label`) are never read here: they are ground truth for evaluation.

The model (`LabelModel`, measured against nearest prototypes, k-NN and prototype+LR blends on trace-disjoint halves
of TRAIL GAIA in docs/quality.md): multinomial logistic regression, classes weighted to balance, on the embedding
concatenated with TF-IDF of word unigrams and bigrams and of character 2-5-grams within words; its probabilities
calibrated by one temperature fitted on cross-validated predictions of the training rows. A category is named by
its label as the examples spell it (the seed's name where that spelling names a topic, not a failure); a seed
category that no example names keeps the seed's name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from failatlas.core.store import Store
from failatlas.embed import EmbeddingSet, vectors_of_texts
from failatlas.embed.tune import read_labelled_files
from failatlas.ingest.kinds import UNKNOWN
from failatlas.ingest.model import text_hash
from failatlas.taxonomy.drafts import Draft, draft_of
from failatlas.taxonomy.inputs import ClusteringInput
from failatlas.taxonomy.keywords import class_tfidf
from failatlas.taxonomy.model import BuildParams, SeedReport
from failatlas.taxonomy.seeding import Seed, SeedCategory

_GENERIC = {"error", "errors", "issue", "issues", "failure", "failures", "problem", "problems"}


def label_key(name: str) -> tuple[str, ...]:
    """The words of a category name that identify it: lower case, without generic tail words and plural s
    ('Formatting Errors' and 'Formatting error' -> ('formatting',))."""
    words = [w.removesuffix("s") if len(w) > 3 else w for w in re.findall(r"[a-z0-9]+", name.lower())]
    while len(words) > 1 and (words[-1] in _GENERIC or words[-1] + "s" in _GENERIC):
        words.pop()
    return tuple(words)


def match_seed(label: str, categories: Sequence[SeedCategory]) -> SeedCategory | None:
    """The seed category a label names: the same key, else the only category whose key starts with the label's
    words or whose words the label's key starts with ('Tool-related' -> 'Tool-related hallucination')."""
    key = label_key(label)
    exact = [c for c in categories if label_key(c.name) == key]
    if exact:
        return exact[0]
    prefix = [c for c in categories if (k := label_key(c.name))[: len(key)] == key or key[: len(k)] == k]
    return prefix[0] if len(prefix) == 1 else None


def shown_name(spelled: str, seed_name: str) -> str:
    """The name a learned seed category is shown by: the label as the examples spell it, unless that is no
    readable failure name ('Task Orchestration', 'Language-only': a topic) and the seed's own name is
    ('Task orchestration error'); the two name the same category (`match_seed` matched them)."""
    from failatlas.taxonomy.labelling.readable import unreadable_reason

    return seed_name if unreadable_reason(spelled) and not unreadable_reason(seed_name) else spelled


def same_category(name: str, label: str) -> bool:
    """Whether a category name and a label name the same category (as `match_seed` matches them)."""
    return match_seed(label, [SeedCategory(name=name, definition="-")]) is not None


@dataclass
class TrainingSet:
    """Labelled statements to learn from: text, label (as spelled), where each row came from."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # 'examples' | 'seed' | 'user'
    vectors: np.ndarray | None = None  # their embeddings, once computed

    def add(self, text: str, label: str, source: str) -> None:
        self.texts.append(text)
        self.labels.append(label)
        self.sources.append(source)


def read_examples(paths: Sequence[str | Path]) -> list[tuple[str, str]]:
    """(text, label) of every labelled statement in the files or folders (any format `ingest file` reads).
    InputError naming file, line and field for a statement without a label, or a file with none."""
    return read_labelled_files(paths)


def examples_digest(paths: Sequence[str | Path]) -> list[str]:
    """A content hash per example file (so a snapshot built from changed examples is a new one)."""
    from failatlas.embed.models import file_digest
    from failatlas.ingest.files import expand_paths

    return [file_digest(f)[:16] for f in expand_paths([Path(p) for p in paths])]


def user_labels(store: Store) -> list[tuple[str, str, str]]:
    """(text hash, text, label) of every stored label."""
    return store.query("SELECT text_hash, text, label FROM insight_labels ORDER BY text_hash")


def training_set(seed: Seed | None, examples: Sequence[tuple[str, str]], labels: Sequence[tuple[str, str, str]],
                 phase: str, *, seed_rows: bool = True) -> tuple[TrainingSet, dict[str, SeedCategory]]:
    """The rows to learn from for a phase and the category of each label. A seed category takes the spelling of
    the first example or label naming it; a label naming no seed category is a category of its own. Without
    `seed_rows`, the seed only names and defines the categories labels name; its texts train nothing."""
    categories = seed.categories_for(phase) if seed else []
    spelled: dict[str, SeedCategory] = {}
    by_seed: dict[str, str] = {}  # seed category name -> label as spelled

    def category_of(label: str) -> str:
        seed_cat = match_seed(label, categories)
        if seed_cat is None:
            spelled.setdefault(label, SeedCategory(name=label, definition=f"Statements labelled '{label}'."))
            return label
        name = by_seed.setdefault(seed_cat.name, label)
        spelled.setdefault(name, seed_cat.model_copy(update={"name": shown_name(name, seed_cat.name)}))
        return name

    data = TrainingSet()
    for text, label in examples:
        data.add(text, category_of(label), "examples")
    for _, text, label in labels:
        data.add(text, category_of(label), "user")
    for c in categories if seed_rows else []:
        name = by_seed.get(c.name, c.name)
        spelled.setdefault(name, c)
        for text in (c.name, f"{c.name}: {c.definition}", *c.examples):
            data.add(text, name, "seed")
    return data, spelled


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class LabelModel:
    """Multinomial logistic regression on [embedding | TF-IDF of words | TF-IDF of characters within words],
    probabilities calibrated by a temperature fitted on `folds`-fold cross-validated predictions (scikit-learn
    conventions: `fit` returns self). The character features and the balanced classes were chosen by
    trace-grouped cross-validation inside each half of TRAIL GAIA (docs/quality.md, issue 41)."""

    def __init__(self, C: float = 4.0, tfidf_weight: float = 1.0, char_weight: float = 1.0,
                 class_weight: str | None = "balanced", folds: int = 5, random_state: int = 0) -> None:
        self.C = C
        self.tfidf_weight = tfidf_weight
        self.char_weight = char_weight
        self.class_weight = class_weight
        self.folds = folds
        self.random_state = random_state

    def _features(self, vectors: np.ndarray, texts: Sequence[str]):  # noqa: ANN202
        from scipy.sparse import csr_matrix, hstack

        parts = [csr_matrix(vectors), self.tfidf_weight * self.tfidf_.transform(list(texts))]
        if self.char_tfidf_ is not None:
            parts.append(self.char_weight * self.char_tfidf_.transform(list(texts)))
        return hstack(parts).tocsr()

    def _fit_one(self, vectors: np.ndarray, texts: Sequence[str], y: np.ndarray):  # noqa: ANN202
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        min_df = 2 if len(texts) > 50 else 1
        self.tfidf_ = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=min_df).fit(list(texts))
        # character n-grams within words: the same cue in another form ('formatted', 'formatting'; '<end_plan>')
        self.char_tfidf_ = (TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=min_df)
                            .fit(list(texts)) if self.char_weight else None)
        return LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=3000).fit(
            self._features(vectors, texts), y)

    def _logits(self, clf, vectors: np.ndarray, texts: Sequence[str], n_classes: int) -> np.ndarray:  # noqa: ANN001
        out = np.full((len(texts), n_classes), -1e9)
        if len(clf.classes_) == 1:
            out[:, clf.classes_[0]] = 0.0
            return out
        z = clf.decision_function(self._features(vectors, texts))
        if z.ndim == 1:
            z = np.stack([-z / 2, z / 2], axis=1)
        out[:, clf.classes_] = z
        return out

    def fit(self, vectors: np.ndarray, texts: Sequence[str], labels: Sequence[str]) -> LabelModel:
        self.classes_ = np.array(sorted(set(labels)), dtype=object)
        y = np.searchsorted(self.classes_, np.asarray(labels, dtype=object))
        n, k = len(y), len(self.classes_)
        cv = np.full((n, k), -1e9)
        if k > 1 and n >= 4:
            from sklearn.model_selection import KFold

            for train, test in KFold(min(self.folds, n), shuffle=True, random_state=self.random_state).split(y):
                if len(set(y[train])) < 2:  # a fold with one class trains no classifier
                    continue
                clf = self._fit_one(vectors[train], [texts[i] for i in train], y[train])
                cv[test] = self._logits(clf, vectors[test], [texts[i] for i in test], k)
            seen = cv[np.arange(n), y] > -1e8
            grid = np.geomspace(0.1, 10.0, 81)
            nll = [-np.log(_softmax(cv[seen] / t)[np.arange(seen.sum()), y[seen]] + 1e-12).mean() for t in grid]
            self.temperature_ = float(grid[int(np.argmin(nll))]) if seen.any() else 1.0
        else:
            self.temperature_ = 1.0
        self.cv_predictions_ = np.where(cv.max(axis=1) > -1e8, cv.argmax(axis=1), -1)
        self.cv_truth_ = y
        self.clf_ = self._fit_one(vectors, texts, y) if k > 1 else None
        return self

    def predict_proba(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Calibrated probability of each class (columns in `classes_` order) per statement."""
        if self.clf_ is None:
            return np.ones((len(texts), 1))
        return _softmax(self._logits(self.clf_, vectors, texts, len(self.classes_)) / self.temperature_)


def embed_texts(store: Store, embedding_set: EmbeddingSet, texts: Sequence[str],
                encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Vectors of `texts` in the embedding set's space: the stored ones where the set has them, the rest encoded
    (and not stored: examples are not insights)."""
    if not texts:
        return np.zeros((0, embedding_set.dim), dtype=np.float32)
    vectors, found = vectors_of_texts(store, embedding_set, texts)
    vectors = np.array(vectors, dtype=np.float32)
    missing = np.flatnonzero(~found)
    if len(missing):
        vectors[missing] = np.asarray(encode([texts[i] for i in missing]), dtype=np.float32)
    return vectors


MIN_LABELLED_CATEGORIES = 2  # a classifier of one category takes everything near it: below this, clustering decides


@dataclass
class Learner:
    """What a build learned: the model per phase and kind, the category of each class, and the stored labels.

    A stored label teaches only the phase and kind of the insights with its text (`scopes`: text hash -> their
    (phase, kind) pairs), so it never moves an insight of another phase, or of a kind the evidence decided, into
    its category. Examples, and labels whose text no insight has, carry no phase or kind: they teach only where no
    evidence decided one (kind `unknown`, e.g. imported free text)."""

    seed: Seed | None
    examples: list[tuple[str, str]]
    labels: list[tuple[str, str, str]]
    threshold: float
    store: Store
    embedding_set: EmbeddingSet
    encode: Callable[[list[str]], np.ndarray]
    scopes: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    notes: dict[str, dict] = field(default_factory=dict)

    def in_scope(self, phase: str, kind: str = UNKNOWN) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
        """The examples and stored labels that may teach the insights of this phase and kind."""
        free = kind == UNKNOWN
        labels = [lab for lab in self.labels
                  if (phase, kind) in self.scopes.get(lab[0], ()) or (free and not self.scopes.get(lab[0]))]
        return (self.examples if free else []), labels

    def labelled_categories(self, phase: str, kind: str = UNKNOWN) -> list[str]:
        """The categories that examples or labels in scope name for this phase and kind (seed texts not counted):
        the build learns there only when they are at least MIN_LABELLED_CATEGORIES."""
        examples, labels = self.in_scope(phase, kind)
        data, _ = training_set(self.seed, examples, labels, phase, seed_rows=False)
        return sorted(set(data.labels))

    def learns(self, phase: str, kind: str = UNKNOWN) -> bool:
        return len(self.labelled_categories(phase, kind)) >= MIN_LABELLED_CATEGORIES

    def model_for(self, phase: str, kind: str = UNKNOWN, *, seed_rows: bool = True
                  ) -> tuple[LabelModel, dict[str, SeedCategory], TrainingSet]:
        examples, labels = self.in_scope(phase, kind)
        data, categories = training_set(self.seed, examples, labels, phase, seed_rows=seed_rows)
        vectors = embed_texts(self.store, self.embedding_set, data.texts, self.encode)
        data.vectors = vectors
        model = LabelModel().fit(vectors, data.texts, data.labels)
        ok = model.cv_predictions_ == model.cv_truth_
        user = np.asarray(data.sources) == "user"
        self.notes[phase if kind == UNKNOWN else f"{phase}/{kind}"] = {
            "n_training_rows": len(data.texts), "rows_by_source": dict(Counter(data.sources)),
            "n_categories": len(categories), "temperature": round(model.temperature_, 4),
            "cv_accuracy_training_rows": round(float(ok.mean()), 4) if len(ok) else None,
            "cv_accuracy_user_labels": round(float(ok[user].mean()), 4) if user.any() else None,
        }
        return model, categories, data


def make_learner(store: Store, seed: Seed | None, example_paths: Sequence[str], use_labels: bool,
                 threshold: float, embedding_set: EmbeddingSet,
                 encode: Callable[[list[str]], np.ndarray]) -> Learner | None:
    """A learner when there is something to learn from (examples or stored labels); None otherwise (a seed alone
    keeps its prototype assignment)."""
    examples = read_examples(example_paths) if example_paths else []
    labels = user_labels(store) if use_labels else []
    if not examples and not labels:
        return None
    return Learner(seed, examples, labels, threshold, store, embedding_set, encode, label_scopes(store, labels))


def label_scopes(store: Store, labels: Sequence[tuple[str, str, str]]) -> dict[str, set[tuple[str, str]]]:
    """text hash -> the (phase, kind) of each insight of the store with that text; a label whose text no insight
    has is absent."""
    by_text = {text: h for h, text, _ in labels}
    out: dict[str, set[tuple[str, str]]] = {}
    for text, phase, kind in store.query(
            "SELECT DISTINCT text, phase, coalesce(kind, 'unknown') FROM insights"
            " WHERE text IN (SELECT unnest(?::VARCHAR[]))", [list(by_text)]):
        out.setdefault(by_text[text], set()).add((phase, kind))
    return out


def learning_key(store: Store, example_paths: Sequence[str], use_labels: bool) -> str | None:
    """What a snapshot learned from, as one hash: the example files' contents and the stored labels; None when
    it learns from nothing."""
    labels = user_labels(store) if use_labels else []
    if not example_paths and not labels:
        return None
    payload = [examples_digest(example_paths) if example_paths else [], [[h, lab] for h, _, lab in labels]]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:16]


def near_enough(vectors: np.ndarray, data: TrainingSet, classes: Sequence[str], best: np.ndarray,
                q: float) -> np.ndarray:
    """Per insight: whether it is as near its predicted category's labelled statements (their unit mean) as a
    match must be, by the rule a seed's prototypes follow (`calibrate_threshold`: closer than the `q` quantile of
    the cosines to the categories that are not its nearest). With one category there is no mismatch to measure:
    then closer than the `q` quantile of the corpus' own cosines to it. Labels that name a few categories would
    otherwise take every statement (a classifier of k classes always picks one of them)."""
    from failatlas.taxonomy.seeding import calibrate_threshold

    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    train = data.vectors / np.maximum(np.linalg.norm(data.vectors, axis=1, keepdims=True), 1e-12)
    labels = np.asarray(data.labels)
    protos = np.stack([train[labels == c].mean(axis=0) for c in classes])
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    sims = unit @ protos.T
    gate = calibrate_threshold(sims, q) if len(classes) > 1 else float(np.quantile(sims[:, 0], q))
    return sims[np.arange(len(unit)), best] >= gate


def learned_categories(rows: np.ndarray, ids: list[str], texts: list[str], vectors: np.ndarray, phase: str,
                       params: BuildParams, learner: Learner, kind: str = UNKNOWN,
                       types: list[np.ndarray] | None = None) -> tuple[list[Draft], np.ndarray]:
    """Drafts of the learned categories that take some of the insights at `rows` (all of this phase and kind;
    calibrated probability at least the learner's threshold; an insight a person labelled goes to its label's
    category whatever the model says), and which of `rows` they took. The seed's texts train only where no
    evidence decided the kind; elsewhere, and without a seed, a category takes only what is as near its labelled
    statements as a seed's match must be. With `types` (the member vectors of each type the insights sit in
    without labels), a statement a person did not label is taken only when it is nearer its category's labelled
    statements than to any other category by the calibrated margin (taxonomy/margin.py)."""
    seed_rows = kind == UNKNOWN
    model, categories, data = learner.model_for(phase, kind, seed_rows=seed_rows)
    mine, mine_texts = vectors[rows], [texts[r] for r in rows]
    proba = model.predict_proba(mine, mine_texts)
    best, confidence = proba.argmax(axis=1), proba.max(axis=1)
    covered = confidence >= learner.threshold
    if learner.seed is None or not seed_rows:  # no scheme says the labels cover the domain: they name only that
        covered &= near_enough(mine, data, model.classes_, best, params.seed_null_quantile)
    if types is not None and len(model.classes_) > 1:
        covered &= _within_margin(mine, data, list(model.classes_), best, types, learner, f"{phase}/{kind}")
    given = {text_hash(t): lab for t, lab, src in zip(data.texts, data.labels, data.sources, strict=True)
             if src == "user"}
    column = {name: k for k, name in enumerate(model.classes_)}
    for r, text in enumerate(mine_texts):
        label = given.get(text_hash(text))
        if label is not None:
            best[r], covered[r] = column[label], True
    keywords = class_tfidf(mine_texts, np.where(covered, best, -1), top_n=params.n_keywords) if covered.any() else {}
    report = SeedReport(phase=phase, n_insights=len(rows), n_explained=int(covered.sum()),
                        threshold=learner.threshold, null_quantile=params.seed_null_quantile, method="learned",
                        n_training_rows=len(data.texts))
    drafts = [
        draft_of(rows[np.flatnonzero(covered & (best == c))], ids, texts, vectors, phase,
                 [t for t, _ in keywords.get(c, [])], [f"seed:{model.classes_[c]}"], origin="seed",
                 seed_category=categories[model.classes_[c]], report=report)
        for c in sorted({int(x) for x in best[covered]})
    ]
    return drafts, covered


def _within_margin(vectors: np.ndarray, data: TrainingSet, classes: list[str], best: np.ndarray,
                   types: list[np.ndarray], learner: Learner, scope: str) -> np.ndarray:
    """Per statement: whether it is nearer its predicted category's labelled statements than to any other
    category by the margin calibrated on `types` (noted in the learner's notes for `scope`)."""
    from failatlas.taxonomy.margin import calibrated_margin, label_prototypes, margins

    protos = label_prototypes(data.vectors, data.labels, classes)
    contrast = np.stack([t.mean(axis=0) for t in types if len(t)]) if any(len(t) for t in types) else \
        np.zeros((0, vectors.shape[1]))
    gate = calibrated_margin(vectors, np.vstack([contrast, protos]))
    gaps = margins(vectors, protos, best, contrast)
    learner.notes.setdefault(scope, {})["spread_margin"] = round(gate, 4)
    return gaps >= gate


def learned_drafts(ci: ClusteringInput, vectors: np.ndarray, params: BuildParams, learner: Learner
                   ) -> tuple[list[Draft], ClusteringInput, np.ndarray, SeedReport]:
    """Drafts of the learned categories that take some of the clustering's insights (`learned_categories`, all
    its insights of kind `unknown`), the clustering restricted to the rest (clustered into new types), their
    vectors, and the report."""
    texts = ci.members["text"].to_list()
    ids = ci.members["insight_id"].to_list()
    phase = ci.phase or Counter(ci.members["phase"].to_list()).most_common(1)[0][0]
    drafts, covered = learned_categories(np.arange(len(ids)), ids, texts, vectors, phase, params, learner)
    rest = np.flatnonzero(~covered)
    uncovered = ClusteringInput(id=ci.id, phase=ci.phase, embedding_set=ci.embedding_set,
                                members=ci.members[rest.tolist()])
    report = SeedReport(phase=phase, n_insights=len(ids), n_explained=int(covered.sum()),
                        threshold=learner.threshold, null_quantile=params.seed_null_quantile, method="learned",
                        n_training_rows=learner.notes[phase]["n_training_rows"])
    return drafts, uncovered, vectors[rest], report


def learned_criterion(params: BuildParams, report: SeedReport) -> str:
    """The inclusion criterion of a learned category."""
    scheme = f"the seed '{params.seed_taxonomy.name}' and " if params.seed_taxonomy else ""
    return (f"Assigned by a classifier learned from {report.n_training_rows} labelled statements ({scheme}the"
            f" examples and labels given), its calibrated probability for this category at least"
            f" {report.threshold:.2f}" + ("" if params.seed_taxonomy else ", and as near the category's labelled"
            " statements as a seed's match must be") + "; or labelled so by a person.")
