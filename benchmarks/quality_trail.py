"""Cluster and taxonomy quality on TRAIL's human-labelled agent errors (GAIA split by default): FailAtlas vs BERTopic.

    python benchmarks/quality_trail.py [--data PATH] [--db PATH] [--model NAME] [--bertopic-runs 3] [--json OUT]
                                       [--half 0|1] [--empty-description skip|evidence]
    python benchmarks/quality_trail.py --transfer [--db DIR/x.duckdb] [--seeds 1] [--user-labels 30]
    python benchmarks/quality_trail.py --tune [--tune-steps N]

`--data` is a TRAIL split as the flattened JSONL (`trail_errors_gaia.jsonl`, or any split's, one row per error)
or as TRAIL's per-trace annotation files (a folder such as `annotations_gaia/`, or one file), read with the
product's TRAIL reader (`failatlas.ingest.importers.trail`: category spelling normalised, trailing commas
accepted); a row without trace_id or category, or a category outside TRAIL's 20, stops the script with one line
naming file, line and field. The benchmark of each error is its split (the JSONL's `split`, the folder's name).
Fills `insights` / `insight_sources` of a fresh store (text = the annotator's `description`, label = the
normalised `category`; duplicate descriptions become one insight whose label is the majority one; an error with
an empty description is left out unless `--empty-description evidence`, which uses its evidence as
`failatlas ingest` does),
embeds them once through the embed stage (all-MiniLM-L6-v2, or `--model`: any name `failatlas embed run --model`
takes, e.g. all-mpnet-base-v2; a --db kept between runs keeps the vectors), then compares on those same vectors:
BERTopic with every default (UMAP unseeded, so it runs several times), k-means on the raw embeddings, and the
FailAtlas cluster stage step by step (each row adds one change to the row above: the ablation), then the
taxonomy stage on the default clusterings: unseeded (offline names), zero-shot by the TRAIL seed's names alone,
and seeded with the TRAIL seed (`taxonomy build --seed trail`), each build with and without fitted definitions
(`--fit-definitions`, opt-in). `--half 0|1` runs everything on one half of the traces (trace id parity). Every row
reports name fidelity where the method names its groups, and the 5-seed stability (mean ARI between the runs of
different seeds). Prints Markdown tables. Nothing is tuned here on anything but the GAIA split.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests/ helpers; the installed failatlas comes first

from failatlas.cluster import ClusterParams, evaluate_clustering, quality_metrics  # noqa: E402
from failatlas.cluster import run as run_cluster  # noqa: E402
from failatlas.cluster.metrics import agreement  # noqa: E402
from failatlas.core.errors import FailAtlasError, InputError  # noqa: E402
from failatlas.embed import DEFAULT_MODEL, EmbedParams, find_embedding_set, load_insight_vectors  # noqa: E402
from failatlas.embed import run as run_embed  # noqa: E402
from failatlas.ingest.importers.base import Problems, as_text, json_lines, load_json_lenient, read_text  # noqa: E402
from failatlas.ingest.importers.trail import TAXONOMY, normalise_category  # noqa: E402
from failatlas.ingest.importers.trail import _text as trail_text  # noqa: E402
from failatlas.store import Store, open_store  # noqa: E402
from failatlas.taxonomy import BuildParams, make_labeller  # noqa: E402
from failatlas.taxonomy import run as build_taxonomy  # noqa: E402
from failatlas.taxonomy.evaluate import evaluate_taxonomy  # noqa: E402
from failatlas.taxonomy.seeding import load_seed, prototypes  # noqa: E402

# the shared data beside the checkout, or where FAILATLAS_SHARED_DATA says (as the tests read it)
DEFAULT_DATA = (Path(os.environ.get("FAILATLAS_SHARED_DATA") or ROOT.parent / "shared" / "data")
                / "trail" / "trail_errors_gaia.jsonl")
PHASE = "other"  # TRAIL errors carry no FailAtlas phase


TEXTS = {
    "description": lambda r: r["description"],
    # the annotator's description followed by the quoted trace span it is about (of the description's first row,
    # so that the insights stay the same 501 distinct descriptions)
    "description+evidence": lambda r: f"{r['description']} {r.get('evidence') or ''}".strip(),
}


def trace_half(trace_id: str) -> int:
    """Which half of the split a trace belongs to (0 or 1): the parity of its hexadecimal id (of a hash of it
    where the id is not hexadecimal), so the halves are fixed by the data, not chosen."""
    try:
        return int(trace_id, 16) % 2
    except ValueError:
        return hashlib.sha256(trace_id.encode()).digest()[-1] % 2


DATA_HINT = ("--data takes a TRAIL split: trail_errors_<split>.jsonl, a folder of per-trace annotation files"
             " (annotations_<split>/) or one such .json file")


@dataclass
class TrailData:
    """Every annotated error of a TRAIL file or folder, in file order (annotation files sorted by name), one dict
    each: trace_id, error_idx, category (TRAIL's leaf name), description (None where empty: the text the
    importer would then take is in `fallback`), evidence, benchmark (the split), source_file/line/field."""

    path: Path
    rows: list[dict[str, Any]]
    files: int = 1
    warnings: list[str] = field(default_factory=list)

    @property
    def splits(self) -> list[str]:
        return sorted({r["benchmark"] for r in self.rows})


def folder_split(folder: Path) -> str:
    """The split of a folder of annotation files, as `failatlas ingest` names it (annotations_gaia -> GAIA);
    "TRAIL" for a folder without a name (the current directory)."""
    name = folder.resolve().name
    return name.removeprefix("annotations_").upper() if name.startswith("annotations_") else (name or "TRAIL")


def _error_row(error: dict[str, Any], *, trace_id: str, index: int, split: str, path: Path, line: int | None,
               prefix: str, problems: Problems) -> dict[str, Any] | None:
    """One annotated error as a row, through the importer's category normalisation and text choice; a missing
    or unknown category goes to `problems` (the importer keeps an unknown one; here it would be a label no
    method can be scored against fairly, so it stops the run)."""
    raw = as_text(error.get("category"))
    label = normalise_category(raw)
    if label is None:
        problems.add("missing category", line=line, field=f"{prefix}category")
        return None
    if label not in TAXONOMY:
        problems.add(f"category {raw!r} is not one of TRAIL's {len(TAXONOMY)} leaf categories (nor a known spelling"
                     " variant: failatlas.ingest.importers.trail.ALIASES)", line=line, field=f"{prefix}category")
        return None
    value, used = trail_text(error, "description")  # the description, or the evidence where it is empty
    return {
        "trace_id": trace_id,
        "error_idx": index,
        "category": label,
        "description": value if used == "description" else None,
        "fallback": value if used != "description" else None,
        "evidence": error.get("evidence"),
        "benchmark": split,
        "source_file": path.name,
        "source_line": line,
        "source_field": f"{prefix}description",
    }


def _read_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    problems = Problems(path)
    default_split = path.stem.removeprefix("trail_errors_").upper()
    seen = False
    for line, row in json_lines(path, problems):
        seen = True
        if not isinstance(row, dict):
            problems.add("expected a JSON object (one TRAIL error per line)", line=line)
            continue
        trace_id, index = as_text(row.get("trace_id")), row.get("error_idx")
        if trace_id is None:
            problems.add("missing trace_id", line=line, field="trace_id")
            continue
        if not isinstance(index, int) or isinstance(index, bool):
            problems.add("missing or non-integer error_idx", line=line, field="error_idx")
            continue
        new = _error_row(row, trace_id=trace_id, index=index, split=as_text(row.get("split")) or default_split,
                         path=path, line=line, prefix="", problems=problems)
        if new is not None:
            rows.append(new)
    problems.raise_if_any()
    if not seen:
        raise InputError("empty file: no TRAIL errors in it", path=str(path), hint=DATA_HINT)


def _read_annotation(path: Path, rows: list[dict[str, Any]], warnings_: list[str]) -> None:
    text = read_text(path)
    if not text.strip():
        raise InputError("empty file: not a TRAIL annotation file", path=str(path), hint=DATA_HINT)
    document, warned = load_json_lenient(path, text)  # a trailing comma is accepted, with a warning
    warnings_.extend(warned)
    if not isinstance(document, dict) or not isinstance(document.get("errors"), list):
        raise InputError("expected an object with an 'errors' list (a TRAIL annotation file)", path=str(path),
                         hint=DATA_HINT)
    problems = Problems(path)
    trace_id = as_text(document.get("trace_id")) or path.stem  # as the importer: the file is named by its trace
    for index, error in enumerate(document["errors"]):
        if not isinstance(error, dict):
            problems.add("expected an object", field=f"errors[{index}]")
            continue
        new = _error_row(error, trace_id=trace_id, index=index, split=folder_split(path.parent), path=path,
                         line=None, prefix=f"errors[{index}].", problems=problems)
        if new is not None:
            rows.append(new)
    problems.raise_if_any()


def read_trail(path: Path) -> TrailData:
    """A TRAIL split from the flattened JSONL (any suffix but .json), a folder of annotation files (`*.json`) or
    one annotation file. InputError (one line naming file, line and field) for a missing path, an empty file or
    folder, a row without trace_id or category, or a category that is not TRAIL's."""
    rows: list[dict[str, Any]] = []
    data = TrailData(path=path, rows=rows)
    if not path.exists():
        raise InputError("no such file or folder", path=str(path), hint=DATA_HINT)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise InputError("no TRAIL annotation files (*.json) in this folder", path=str(path), hint=DATA_HINT)
        for file in files:
            _read_annotation(file, rows, data.warnings)
        data.files = len(files)
    elif path.suffix.lower() == ".json":
        _read_annotation(path, rows, data.warnings)
    else:
        _read_jsonl(path, rows)
    if not rows:
        raise InputError(f"no annotated errors in {'its ' + str(data.files) + ' files' if path.is_dir() else 'it'}",
                         path=str(path), hint=DATA_HINT)
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:  # one error is one occurrence: a second row for it would be dropped silently by the store
        first = seen.setdefault((r["trace_id"], r["error_idx"]), r)
        if first is not r:
            where = f"{r['source_file']}" + (f":{r['source_line']}" if r["source_line"] else "")
            was = f"{first['source_file']}" + (f":{first['source_line']}" if first["source_line"] else "")
            raise InputError(f"error {r['error_idx']} of trace {r['trace_id']} appears twice ({was} and {where})",
                             path=str(path), hint="each (trace_id, error_idx) must be one row")
    return data


def select_rows(rows: list[dict[str, Any]], half: int | None = None,
                empty_description: str = "skip") -> list[dict[str, Any]]:
    """The rows that become insight occurrences: those of `half` (trace id parity) with a description; with
    `empty_description="evidence"` also those without one, their evidence as the text (the importer's choice)."""
    out = []
    for r in rows:
        if half is not None and trace_half(r["trace_id"]) != half:
            continue
        if r["description"] is not None:
            out.append(r)
        elif empty_description == "evidence" and r["fallback"] is not None:
            out.append({**r, "description": r["fallback"], "evidence": None,
                        "source_field": r["source_field"].removesuffix("description") + "evidence"})
    return out


def load_trail(store: Store, path: Path, text: str = "description", half: int | None = None, *,
               empty_description: str = "skip", data: TrailData | None = None) -> int:
    """Insert TRAIL errors (`read_trail(path)`, or `data` already read) as insights and sources with plain SQL;
    returns the rows inserted (those with a description, unless `empty_description="evidence"`).

    `text` picks what an insight's text is (a key of TEXTS); `half` (0 or 1) keeps only that half's traces."""
    data = data or read_trail(path)
    rows = select_rows(data.rows, half, empty_description)
    if not rows:
        raise InputError(f"no errors with a description{'' if half is None else f' in half {half}'}",
                         path=str(data.path), hint=DATA_HINT)
    first = {}
    for r in rows:
        first.setdefault(r["description"], TEXTS[text](r))
    rows = [{**r, "description": first[r["description"]]} for r in rows]

    def iid(text: str) -> str:
        return hashlib.sha256(f"{PHASE}\x1f{text}".encode()).hexdigest()[:16]

    with store.write() as conn:
        conn.executemany(
            "INSERT INTO insight_sources (insight_id, source_key, origin, source_file, source_line,"
            " source_field, label, task_id, benchmark) VALUES (?, ?, 'trail', ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            [
                (
                    iid(r["description"]),
                    f"trail:{r['trace_id']}:{r['error_idx']}",
                    r["source_file"],
                    r["source_line"],
                    r["source_field"],
                    r["category"],
                    r["trace_id"],
                    r["benchmark"],
                )
                for r in rows
            ],
        )
        conn.executemany(
            "INSERT INTO insights (id, phase, text, n_occurrences) VALUES (?, ?, ?, 1)"
            " ON CONFLICT DO NOTHING",
            [(iid(t), PHASE, t) for t in {r["description"]: None for r in rows}],
        )
        conn.execute(
            "UPDATE insights SET n_occurrences = s.n FROM (SELECT insight_id, count(*) AS n"
            " FROM insight_sources GROUP BY insight_id) s WHERE s.insight_id = insights.id"
        )
    return len(rows)


def majority_label(store: Store, ids: list[str]) -> list[str]:
    votes = store.query(
        "SELECT insight_id, label FROM (SELECT insight_id, label, row_number() OVER (PARTITION BY insight_id"
        " ORDER BY count(*) DESC, label) AS r FROM insight_sources GROUP BY insight_id, label) WHERE r = 1"
    )
    by_id = dict(votes)
    return [by_id[i] for i in ids]


def bertopic_default(texts: list[str], vectors: np.ndarray) -> tuple[np.ndarray, float]:
    from bertopic import BERTopic

    start = time.perf_counter()
    topics, _ = BERTopic().fit_transform(texts, embeddings=vectors)
    return np.asarray(topics), time.perf_counter() - start


def kmeans_raw(vectors: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, float]:
    from sklearn.cluster import KMeans

    start = time.perf_counter()
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(vectors)
    return labels, time.perf_counter() - start


# The FailAtlas ablation: each step adds one change to the step before (seeded, through the cluster stage).
BERTOPIC_LIKE = dict(
    normalise="none",
    n_neighbors=15,
    n_components=5,
    min_cluster_size=10,
    min_samples=10,
    cluster_selection_method="eom",
)
ADAPTIVE_UMAP = {**BERTOPIC_LIKE, "n_neighbors": None, "n_components": None}
DEFAULTS: dict[str, Any] = {}  # ClusterParams() as shipped: adaptive UMAP, leaf selection, sizes from N
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("FailAtlas with BERTopic's settings, seeded", BERTOPIC_LIKE),
    ("+ UMAP neighbours ~sqrt(N) in [15, 50], 10 dims", ADAPTIVE_UMAP),
    ("+ leaf selection, min_cluster_size 2/3 sqrt(N), min_samples half (defaults)", DEFAULTS),
    ("+ outliers reassigned to nearest centroid (--reassign-outliers)", {"reassign_outliers": True}),
    (
        "alt: + masking numbers/paths/ids/quotes (--normalise)",
        {"reassign_outliers": True, "normalise": "mask"},
    ),
    (
        "alt: eom selection, min_cluster_size 5 (finer)",
        {"reassign_outliers": True, "cluster_selection_method": "eom", "min_cluster_size": 5},
    ),
]


DEFAULT_STEP = "+ outliers reassigned to nearest centroid (--reassign-outliers)"
SEEDED_ROW = "taxonomy seeded with TRAIL's 20 categories"


def taxonomy_rows(
    store: Store, model: str, ids: list[str], labels: list[str], clusterings: list[str], add, quantiles: list[float]
) -> None:
    """The taxonomy stage on each seed's default clustering: unseeded (offline names), zero-shot by the TRAIL
    seed's category names alone, and seeded (`--seed trail`); every row through `evaluate_taxonomy`."""
    from failatlas.embed import get_embedder

    embedder = get_embedder(model)
    trail = load_seed("trail")
    position = {i: k for k, i in enumerate(ids)}

    def types_of(taxonomy_id: str) -> np.ndarray:
        rows = store.query(
            "SELECT a.insight_id, t.id FROM insight_failure_types a LEFT JOIN failure_types t"
            " ON t.taxonomy_id = a.taxonomy_id AND t.id = a.failure_type_id WHERE a.taxonomy_id = ?",
            [taxonomy_id],
        )
        index = {t: k for k, t in enumerate(sorted({r[1] for r in rows if r[1] is not None}))}
        out = np.full(len(ids), -1)
        for insight, type_id in rows:
            out[position[insight]] = -1 if type_id is None else index[type_id]
        return out

    # zero-shot: each insight to the nearest category name, nothing else (one run: no randomness)
    vectors = load_insight_vectors(store, find_embedding_set(store, model=model, normalise="none")).vectors
    categories = trail.categories_for(PHASE)
    start = time.perf_counter()
    names = embedder.encode([c.name for c in categories])
    zero = (vectors @ names.T).argmax(axis=1)
    add("zero-shot: nearest TRAIL category name", [zero], [time.perf_counter() - start], None)
    start = time.perf_counter()
    protos = prototypes(categories, lambda t: embedder.encode(t))
    proto_pred = (vectors @ protos.T).argmax(axis=1)
    add("zero-shot: nearest TRAIL prototype (name, definition, examples)", [proto_pred],
        [time.perf_counter() - start], None)
    fitted = ", fitted definitions (--fit-definitions)"
    variants = [
        ("taxonomy, unseeded (offline names)", None, 0.8, False),
        ("taxonomy, unseeded (offline names)" + fitted, None, 0.8, True),
        (SEEDED_ROW, trail, quantiles[0], False),
    ] + [
        (SEEDED_ROW + fitted + ("" if k == 0 else f", seed quantile {q}"), trail, q, True)
        for k, q in enumerate(quantiles)
    ]
    for method, seed, quantile, fit in variants:
        preds, secs, fidelity, coverage = [], [], [], []
        for clustering_id in clusterings:
            start = time.perf_counter()
            params = BuildParams(clustering_ids=[clustering_id], seed_taxonomy=seed, seed_null_quantile=quantile,
                                 fit_definitions=fit)
            tax = build_taxonomy(store, params, labeller=make_labeller("offline"), embedder=embedder)
            secs.append(time.perf_counter() - start)
            quality = evaluate_taxonomy(store, tax.id, embedder=embedder)
            preds.append(types_of(tax.id))
            assert abs(quality["labels"]["ari"] - quality_metrics(labels, preds[-1])["ari"]) < 1e-9
            fidelity.append(quality["name_fidelity"])
            coverage += [c["coverage"] for c in quality["coverage"].values()]
        add(method, preds, secs, None, fidelity, coverage or None)


def fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("TRAIL_GAIA", DEFAULT_DATA)),
                    help="a TRAIL split: trail_errors_<split>.jsonl, a folder of per-trace annotation files"
                    " (annotations_<split>/) or one of them (default: the GAIA JSONL of the shared data)")
    ap.add_argument("--db", type=Path, default=None, help="store to fill (default: a temporary file)")
    ap.add_argument("--model", default=DEFAULT_MODEL, help="embedding model (as `failatlas embed run --model`)")
    ap.add_argument(
        "--no-alternatives", action="store_true", help="only the ablation steps, not the 'alt:' rows"
    )
    ap.add_argument("--text", choices=sorted(TEXTS), default="description", help="what an insight's text is")
    ap.add_argument("--bertopic-runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42, help="first of the seeds each configuration runs with")
    ap.add_argument("--seeds", type=int, default=5, help="how many seeds (their metrics are averaged)")
    ap.add_argument("--json", type=Path, default=None, help="also write all metrics here")
    ap.add_argument("--seed-quantiles", default="0.8,0.9,0.95",
                    help="seed calibration quantiles to report (the first is the shipped default, 0.8)")
    ap.add_argument("--half", type=int, choices=(0, 1), default=None,
                    help="only the traces of one half (trace id parity): every method runs on that half alone")
    ap.add_argument("--empty-description", choices=("skip", "evidence"), default="skip",
                    help="an error whose description is empty: left out (default, as in every earlier result) or"
                    " its evidence as the text (as `failatlas ingest` does)")
    ap.add_argument("--transfer", action="store_true",
                    help="transfer mode (benchmarks/trail_transfer.py): learn from one trace-disjoint half with"
                    " --examples, evaluate on the other, both directions; then 30 user labels (--user-labels)")
    ap.add_argument("--user-labels", type=int, default=30, help="transfer mode: statements a person labels")
    ap.add_argument("--tune", action="store_true",
                    help="tune mode (benchmarks/trail_tune.py): `embed tune` on one half's labels, the base and the"
                    " tuned encoder compared on the other half, both directions")
    ap.add_argument("--tune-steps", type=int, default=None, help="tune mode: optimiser steps (default: tune's)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("FAILATLAS_NO_PROGRESS", "1")
    if args.tune:
        import trail_tune

        out = trail_tune.run_tune_benchmark(args, sys.modules[__name__])
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
        return out
    if args.transfer:
        import trail_transfer

        out = trail_transfer.run_transfer(args, sys.modules[__name__])
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
        return out

    try:  # the data first: a bad file stops the run in one line before any store is made
        trail = read_trail(args.data)
        selected = select_rows(trail.rows, args.half, args.empty_description)
        if not selected:
            raise InputError(f"no errors with a description{'' if args.half is None else f' in half {args.half}'}",
                             path=str(args.data), hint=DATA_HINT)
    except FailAtlasError as exc:
        print(f"quality_trail: error: {exc.one_line()}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    for warning in trail.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    in_half = [r for r in trail.rows if args.half is None or trace_half(r["trace_id"]) == args.half]
    n_empty = sum(r["description"] is None for r in in_half)
    db = args.db or Path(tempfile.mkdtemp(prefix="quality_trail_")) / "trail.duckdb"
    store = open_store(db)
    n_rows = load_trail(store, args.data, args.text, args.half, empty_description=args.empty_description, data=trail)
    timing: dict[str, float] = {}
    steps = [(n, s) for n, s in STEPS if not (args.no_alternatives and n.startswith("alt:"))]
    norms = sorted({s.get("normalise", "none") for _, s in steps})
    for norm in norms:
        report = run_embed(store, EmbedParams(model=args.model, normalise=norm))
        timing[f"embed_{norm}"] = report.seconds
    data = load_insight_vectors(store, find_embedding_set(store, model=args.model, normalise="none"))
    ids, texts, vectors = data.ids, data.texts, data.vectors
    labels = majority_label(store, ids)
    n_labels = len(set(labels))
    results: list[dict[str, Any]] = []
    seeds = list(range(args.seed, args.seed + args.seeds))

    keys = (
        "ari",
        "nmi",
        "homogeneity",
        "completeness",
        "purity",
        "outlier_rate",
        "n_clusters",
        "macro_recall",
    )

    def add(
        method: str,
        preds: list[np.ndarray],
        seconds: list[float],
        stability: float | None,
        fidelity: list[float] | None = None,
        coverage: list[float] | None = None,
    ) -> dict:
        """A table row: metrics averaged over `preds` (one per seed or run), ARI and NMI with their spread,
        the mean ARI between the runs (`seed_ari`), and the name fidelity / seed coverage where measured."""
        ms = [quality_metrics(labels, p) for p in preds]
        row = {k: float(np.mean([m[k] for m in ms])) for k in keys}
        row.update(method=method, runs=len(preds), stability_ari=stability, seconds=float(np.mean(seconds)))
        pairs = [agreement(preds[i], preds[j]) for i in range(len(preds)) for j in range(i + 1, len(preds))]
        row["seed_ari"] = float(np.mean(pairs)) if pairs else None
        row["name_fidelity"] = float(np.mean(fidelity)) if fidelity else None
        row["coverage"] = float(np.mean(coverage)) if coverage else None
        row["ari_sd"] = float(np.std([m["ari"] for m in ms]))
        row["nmi_sd"] = float(np.std([m["nmi"] for m in ms]))
        row["per_label_recall"] = {
            lab: float(np.mean([m["per_label_recall"][lab] for m in ms])) for lab in ms[0]["per_label_recall"]
        }
        results.append(row)
        print(
            f"  {method}: ARI {row['ari']:.3f} NMI {row['nmi']:.3f} ({row['seconds']:.1f} s)", file=sys.stderr
        )
        return row

    try:
        import bertopic
    except ImportError:  # the `compare` extra; say so in the output instead of failing the whole comparison
        bertopic = None
        print("BERTopic is not installed (pip install 'failatlas[compare]'): its row is left out", file=sys.stderr)
    if bertopic is not None and args.bertopic_runs:
        runs = [bertopic_default(texts, vectors) for _ in range(args.bertopic_runs)]
        agree = [agreement(runs[i][0], runs[j][0]) for i in range(len(runs)) for j in range(i + 1, len(runs))]
        add(
            f"BERTopic default, unseeded ({len(runs)} runs; stability = ARI between runs)",
            [r[0] for r in runs],
            [r[1] for r in runs],
            float(np.mean(agree)) if agree else None,
        )
    km = [kmeans_raw(vectors, n_labels, seed) for seed in seeds]
    add(
        f"k-means on raw embeddings, k = {n_labels} = number of labels",
        [r[0] for r in km],
        [r[1] for r in km],
        None,
    )

    clustering_ids: dict[str, list[str]] = {}
    for name, settings in steps:
        preds, secs, stab = [], [], None
        for seed in seeds:
            first = seed == seeds[0]
            params = ClusterParams(
                all_phases=True,
                seed=seed,
                stability_runs=2 if first else 0,
                map_2d=False,
                embed_model=args.model,
                **settings,
            )
            (result,) = run_cluster(store, params).clusterings
            metrics = evaluate_clustering(store, result.id, "label")
            clusters = dict(
                store.query(
                    "SELECT insight_id, cluster FROM cluster_assignments WHERE clustering_id = ?", [result.id]
                )
            )
            preds.append(np.array([clusters[i] for i in ids]))
            assert abs(quality_metrics(labels, preds[-1])["ari"] - metrics["ari"]) < 1e-9  # stage agrees
            secs.append(result.timings.get("reduce", 0) + result.timings.get("cluster", 0))
            stab = result.stability_ari if first else stab
            clustering_ids.setdefault(name, []).append(result.id)
        add(name, preds, secs, stab)

    quantiles = [float(q) for q in args.seed_quantiles.split(",") if q.strip()]
    taxonomy_rows(store, args.model, ids, labels, clustering_ids[DEFAULT_STEP], add, quantiles)

    header = [
        "method",
        "ARI (± sd)",
        "NMI (± sd)",
        "homogeneity",
        "completeness",
        "purity",
        "outlier rate",
        "clusters",
        "macro recall",
        "stability ARI",
        "5-seed ARI",
        "name fidelity",
        "time (s)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [
            r["method"],
            f"{r['ari']:.3f} ± {r['ari_sd']:.3f}",
            f"{r['nmi']:.3f} ± {r['nmi_sd']:.3f}",
            r["homogeneity"],
            r["completeness"],
            r["purity"],
            r["outlier_rate"],
            f"{r['n_clusters']:.1f}",
            r["macro_recall"],
            "-" if r["stability_ari"] is None else r["stability_ari"],
            "-" if r["seed_ari"] is None else r["seed_ari"],
            "-" if r["name_fidelity"] is None else r["name_fidelity"],
            f"{r['seconds']:.1f}",
        ]
        lines.append("| " + " | ".join(fmt(c) for c in cells) + " |")
    source = f"{args.data}" + (f", {trail.files} annotation files" if args.data.is_dir() else "")
    empty = (f"; {n_empty} error(s) with an empty description "
             + ("use their evidence" if args.empty_description == "evidence" else "left out")) if n_empty else ""
    print(
        f"TRAIL {' + '.join(trail.splits)}{'' if args.half is None else f' (half {args.half} by trace id parity)'}"
        f" from {source}: {n_rows} labelled"
        f" errors -> {len(ids)} distinct descriptions (insights){empty}, "
        f"{n_labels} labels; text = {args.text}; {args.model} vectors (embedding "
        + ", ".join(f"{t:.1f} s {k.removeprefix('embed_')}" for k, t in timing.items())
        + f"); bertopic {bertopic.__version__ if bertopic else 'not installed'}; "
        f"metrics are means over {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}) or BERTopic runs.\n"
    )
    print("\n".join(lines))
    final = next(r for r in results if r["method"].startswith("+ outliers reassigned"))
    seeded = next(r for r in results if r["method"] == SEEDED_ROW)
    print(f"\nSeed coverage (share of insights the TRAIL seed explains): {seeded['coverage']:.3f}")
    print(
        "\nPer-label recall (share of a label's insights in its best cluster or type, mean over seeds), of the"
        " default pipeline with --reassign-outliers and of the seeded taxonomy:\n"
    )
    print("| label | insights | recall, clusters | recall, seeded taxonomy |\n|---|---|---|---|")
    sizes = {lab: labels.count(lab) for lab in set(labels)}
    for lab, rec in sorted(final["per_label_recall"].items(), key=lambda kv: -sizes[kv[0]]):
        print(f"| {lab} | {sizes[lab]} | {rec:.2f} | {seeded['per_label_recall'][lab]:.2f} |")
    out = {"model": args.model, "text": args.text, "data": str(args.data), "splits": trail.splits,
           "half": args.half, "n_rows": n_rows, "n_insights": len(ids), "n_empty_description": n_empty,
           "empty_description": args.empty_description, "timing": timing}
    out["rows"] = results
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
