"""Tune a dual-encoder labeler's query tower on judged queries; its doc tower stays as it is.

The doc vectors are the base model's, computed once (the corpus cache, the engine's store),
so tuning re-embeds no doc and the tuned labeler reads the vectors the base one stored. Each
step scores a batch of queries against the whole corpus (a softmax over every doc at
temperature τ), pulls the judged docs up (cross-entropy on the judged share) and keeps the
rest of the distribution near the base model's (KL to its softmax, weighted).

Cross-fitted: the judged queries are cut into contiguous folds; for each, a tower is tuned
on the others and measured on it after each epoch (exact nDCG@10 over the corpus), and the
best epoch is kept. The tower exported is tuned on every judged query for the epochs the
folds chose. Choices made on train afterwards (the frontier's fusion weights and methods)
label each train query with the fold tower that never trained on it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.datasets import BeirSplit
from es_tour.errors import ConfigError, ModelError
from es_tour.models._corpus_cache import unit_corpus_embeddings
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.models._manifest import CACHE, PRECISIONS, sha256, write_manifest
from es_tour.models._runtime import DualEncoder
from es_tour.training._corpus import exact_search, run_ndcg_at_10
from es_tour.training._export import _export_deps, _trace, quantize, torch_pool
from es_tour.training._samples import PARITY_TEXTS

TRAINING_FILE = "training.json"
FOLDS = "folds"  # beside the tuned tower: one tower per fold of the judged queries
QUERY_MODELS = {"fp32": "query.onnx", "int8": "query.int8.onnx"}
PARITY_MIN_COSINE = 0.99  # the base graph's weights, loaded into torch, must embed as it does


@dataclass(frozen=True)
class QueryTowerOptions:
    """How to tune; the defaults are those of the run in docs/models.md."""

    epochs: int = 4  # at most, per fold; the whole split's tower takes the folds' choice
    learning_rate: float = 2e-5
    temperature: float = 0.02  # τ of the softmax over the corpus
    teacher_weight: float = 1.0  # weight of KL to the base model's softmax
    batch_queries: int = 16
    max_length: int = 64  # query tokens; SciFact's claims fit in 40
    folds: int = 4  # contiguous parts of the judged queries, each held out by one tower
    seed: int = 0


@dataclass(frozen=True)
class TunedTower:
    """One tower: the queries it trained on and held out, its held-out exact nDCG@10 (the
    base's, and after each epoch), the epochs kept (0: the base tower), and for the
    whole split's tower its folds'."""

    path: Path
    base: str
    trained: list[str]
    held_out: list[str]
    epoch_ndcg: list[float]
    base_ndcg: float
    chosen_epoch: int
    seconds: float
    folds: list[TunedTower] = field(default_factory=list)

    def cross_fitted(self) -> tuple[float, float]:
        """(base, tuned) held-out nDCG@10 over the folds, each query's by the tower that
        never trained on it, weighted by fold size."""
        sizes = [len(fold.held_out) for fold in self.folds]
        base = sum(f.base_ndcg * n for f, n in zip(self.folds, sizes, strict=True))
        tuned = sum((f.epoch_ndcg[f.chosen_epoch - 1] if f.chosen_epoch else f.base_ndcg) * n
                    for f, n in zip(self.folds, sizes, strict=True))
        return base / sum(sizes), tuned / sum(sizes)


def train_parts(labeler: str, query_ids: Sequence[str]) -> list[tuple[str, list[str]]]:
    """`query_ids` (train queries) parted by the labeler that may label them in a choice
    made on train: for a tower tuned here, each fold's queries go to the fold's tower,
    which never trained on them; any other labeler labels them all."""
    try:
        path, registry_name = model_directory(labeler)
    except ConfigError:  # an ensemble: not one directory
        return [(labeler, list(query_ids))]
    facts = path / TRAINING_FILE
    if registry_name is not None or not facts.is_file():
        return [(labeler, list(query_ids))]
    folds = json.loads(facts.read_text(encoding="utf-8"))["folds"]
    wanted = set(query_ids)
    parts = [(str(path / FOLDS / str(k)), [q for q in fold["held_out"] if q in wanted])
             for k, fold in enumerate(folds)]
    covered = {q for _, queries in parts for q in queries}
    if wanted - covered:
        raise ConfigError(f"[{labeler}] was tuned on train queries no fold held out "
                          f"({len(wanted - covered)}): it cannot be fitted on them")
    return [part for part in parts if part[1]]


def check_options(options: QueryTowerOptions, queries: int) -> None:
    if options.epochs < 1 or options.batch_queries < 1 or options.max_length < 2:
        raise ConfigError("epochs and batch_queries must be >= 1, max_length >= 2")
    if not 2 <= options.folds <= queries:
        raise ConfigError(f"folds [{options.folds}] must be between 2 and the split's "
                          f"{queries} judged queries")
    if options.temperature <= 0 or options.learning_rate <= 0 or options.teacher_weight < 0:
        raise ConfigError("temperature and learning_rate must be > 0, teacher_weight >= 0")


def torch_tower(encoder: DualEncoder) -> Any:
    """The base graph's weights in a transformers `BertModel`, checked to embed queries as
    the ONNX graph does. The graph stores each linear weight transposed under a generated
    name, found as the MatMul whose sum with `<layer>.bias` follows it."""
    torch, transformers = _export_deps()
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(encoder.path / encoder.manifest.models["fp32"])).graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    state = {name: array for name, array in weights.items() if not name.startswith("onnx::")}
    users: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1].startswith("onnx::") \
                and node.input[1] in weights:
            biases = [i for user in users.get(node.output[0], []) for i in user.input
                      if i.endswith(".bias") and i in weights]
            if biases:
                state[biases[0].removesuffix(".bias") + ".weight"] = weights[node.input[1]].T
    hidden = state["embeddings.word_embeddings.weight"].shape[1]
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.layer."))
    reference = DualEncoder(encoder.path).encode_queries(list(PARITY_TEXTS[:8]))  # fp32
    # Head count is not stored in weights; the one whose embeddings match the graph is right.
    for head_width in (32, 64):
        config = transformers.BertConfig(
            vocab_size=state["embeddings.word_embeddings.weight"].shape[0],
            hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=hidden // head_width,
            intermediate_size=state["encoder.layer.0.intermediate.dense.weight"].shape[0],
            max_position_embeddings=state["embeddings.position_embeddings.weight"].shape[0],
            type_vocab_size=state["embeddings.token_type_embeddings.weight"].shape[0])
        net = transformers.BertModel(config, add_pooling_layer=False)
        loaded = net.load_state_dict({k: torch.tensor(v) for k, v in state.items()},
                                     strict=False)
        if loaded.missing_keys:
            raise ModelError(f"[{encoder.path}] is not a BERT graph es-tour can tune: "
                             f"no weights for {loaded.missing_keys[:3]}")
        net.eval()
        tokens = _tokens(torch, encoder, list(PARITY_TEXTS[:8]), encoder.max_length)
        with torch.no_grad():
            mine = _embed(torch, net, tokens, encoder.manifest.pooling).numpy()
        if float((mine * reference).sum(axis=1).min()) >= PARITY_MIN_COSINE:
            return net
    raise ModelError(f"[{encoder.path}]'s weights loaded into torch do not embed as its graph "
                     f"does (cosine < {PARITY_MIN_COSINE}); it cannot be tuned")


def tune_query_tower(
    base: str, split: BeirSplit, out: Path, options: QueryTowerOptions = QueryTowerOptions(),
    on_step: Callable[[], None] | None = None,
) -> TunedTower:
    """Tune `base`'s query tower on `split`'s judged queries, cross-fitted, and write the
    model directory `out`: the base's doc graphs and tokenizer, the tuned `query.onnx` (and
    int8), the base's corpus vectors of `split`'s corpus, `training.json`, and under
    `folds/` one tower per fold, tuned on the other folds' queries (what choices on train
    label that fold's queries with, so that no choice sees a tower that trained on them).
    `on_step` is called after each optimiser step (`tuning_steps` of them at most)."""
    torch, _ = _export_deps()
    path, registry_name = model_directory(base)
    encoder = DualEncoder(path, labeler_precision(base))
    if encoder.manifest.query_models:
        raise ConfigError(f"[{base}] has a tuned query tower already; tune its base instead")
    judged = [i for i, q in enumerate(split.query_ids) if split.qrels.get(q)]
    check_options(options, len(judged))
    started = time.perf_counter()
    tuning = _Tuning(torch, encoder, split, options, on_step)
    folds = []
    for k in range(options.folds):
        held = judged[_fold_bounds(len(judged), options.folds, k)]
        held_out = set(held)
        net, fold = tuning.tune([i for i in judged if i not in held_out], held)
        fold = replace(fold, path=out / FOLDS / str(k), base=registry_name or str(path))
        _write(torch, encoder, net, split, fold.path, fold, options)
        folds.append(fold)
    # the whole split, for the epochs the folds chose most often (ties: the fewer)
    chosen = [fold.chosen_epoch for fold in folds]
    epochs = max(sorted(set(chosen)), key=chosen.count)
    net, _ = tuning.tune(judged, [], epochs)
    tuned = TunedTower(out, registry_name or str(path), [split.query_ids[i] for i in judged],
                       [], [], 0.0, epochs, time.perf_counter() - started, folds)
    _write(torch, encoder, net, split, out, tuned, options)
    return tuned


def tuning_steps(judged: int, options: QueryTowerOptions) -> int:
    """The optimiser steps `tune_query_tower` takes at most on `judged` queries: each
    fold's tower on the other folds' queries, then the whole split's, `options.epochs`
    each (the whole split's takes the folds' choice, which may be fewer)."""
    def steps(queries: int) -> int:
        return -(-queries // options.batch_queries) * options.epochs

    held = [len(range(judged)[_fold_bounds(judged, options.folds, k)])
            for k in range(options.folds)]
    return sum(steps(judged - n) for n in held) + steps(judged)


def _fold_bounds(judged: int, folds: int, k: int) -> slice:
    """Fold `k` of `folds` contiguous parts of `judged` queries."""
    return slice(k * judged // folds, (k + 1) * judged // folds)


class _Tuning:
    """One base tower, its corpus vectors and the judgements: towers tuned from it."""

    def __init__(self, torch: Any, encoder: DualEncoder, split: BeirSplit,
                 options: QueryTowerOptions, on_step: Callable[[], None] | None = None
                 ) -> None:
        self.torch, self.encoder, self.split, self.options = torch, encoder, split, options
        self.on_step = on_step
        self.docs = torch.tensor(unit_corpus_embeddings(encoder, split.corpus_path,
                                                        split.doc_texts))
        self.row = {doc_id: i for i, doc_id in enumerate(split.doc_ids)}
        self.teacher = torch_tower(encoder)

    def tune(self, trained: Sequence[int], held: Sequence[int], epochs: int | None = None
             ) -> tuple[Any, TunedTower]:
        """A tower tuned on the `trained` queries (indices into the split): for `epochs`,
        or with `held` queries, the best of `options.epochs` by their exact nDCG@10."""
        torch, split, options = self.torch, self.split, self.options
        random.seed(options.seed)
        torch.manual_seed(options.seed)
        student = torch_tower(self.encoder)
        base_ndcg = best = self.ndcg(student, held) if held else 0.0
        best_state, chosen, history = None, 0, []
        optimiser = torch.optim.AdamW(student.parameters(), lr=options.learning_rate)
        order = list(trained)
        for epoch in range(1, (options.epochs if epochs is None else epochs) + 1):
            random.shuffle(order)
            student.train()
            for start in range(0, len(order), options.batch_queries):
                batch = order[start:start + options.batch_queries]
                judged_rows = [[self.row[d] for d, grade in split.qrels[split.query_ids[i]].items()
                                if grade > 0 and d in self.row] for i in batch]
                loss = query_tower_loss(
                    torch, student, self.teacher, self.encoder,
                    [split.query_texts[i] for i in batch], judged_rows, self.docs, options)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                if self.on_step is not None:
                    self.on_step()
            student.eval()
            if not held:
                chosen = epoch
                continue
            history.append(self.ndcg(student, held))
            if history[-1] > best:
                best, chosen = history[-1], epoch
                best_state = {k: v.detach().clone() for k, v in student.state_dict().items()}
        if best_state is not None:
            student.load_state_dict(best_state)
        elif held:  # no epoch beat the base: the fold keeps the base tower
            student = torch_tower(self.encoder)
        return student, TunedTower(
            Path(), "", [split.query_ids[i] for i in trained],
            [split.query_ids[i] for i in held], history, base_ndcg, chosen, 0.0)

    def ndcg(self, net: Any, held: Sequence[int]) -> float:
        """Exact nDCG@10 over the corpus of the `held` queries with `net`'s embeddings."""
        split = self.split
        vectors = _query_vectors(self.torch, self.encoder, net,
                                 [split.query_texts[i] for i in held], self.options.max_length)
        rows, scores = exact_search(vectors, self.docs.numpy())
        return run_ndcg_at_10(split, {
            split.query_ids[i]: {split.doc_ids[r]: float(s) for r, s in zip(rs, ss, strict=True)}
            for i, rs, ss in zip(held, rows, scores, strict=True)})


def query_tower_loss(torch: Any, student: Any, teacher: Any, encoder: DualEncoder,
                     queries: Sequence[str], judged_rows: Sequence[Sequence[int]],
                     docs: Any, options: QueryTowerOptions) -> Any:
    """Cross-entropy of the softmax over every doc against the judged docs (shared evenly),
    plus `teacher_weight` × KL(teacher's softmax ‖ student's)."""
    tokens = _tokens(torch, encoder, queries, options.max_length)
    log_p = torch.log_softmax(
        _embed(torch, student, tokens, encoder.manifest.pooling) @ docs.T
        / options.temperature, dim=-1)
    target = torch.zeros_like(log_p)
    for r, rows in enumerate(judged_rows):
        if rows:
            target[r, rows] = 1.0 / len(rows)
    loss = -(target * log_p).sum(dim=-1).mean()
    if options.teacher_weight:
        with torch.no_grad():
            teacher_p = torch.softmax(
                _embed(torch, teacher, tokens, encoder.manifest.pooling) @ docs.T
                / options.temperature, dim=-1)
        loss = loss + options.teacher_weight * torch.nn.functional.kl_div(
            log_p, teacher_p, reduction="batchmean")
    return loss


def _tokens(torch: Any, encoder: DualEncoder, texts: Sequence[str], max_length: int
            ) -> dict[str, Any]:
    tokenizer = _padding_tokenizer(encoder.path / encoder.manifest.tokenizer,
                                   encoder.manifest.pad_id, max_length)
    encodings = tokenizer.encode_batch([encoder.query_prefix + t for t in texts])
    ids = torch.tensor([e.ids for e in encodings])
    return {"input_ids": ids, "attention_mask": torch.tensor([e.attention_mask
                                                             for e in encodings]),
            "token_type_ids": torch.zeros_like(ids)}


@functools.lru_cache(maxsize=8)
def _padding_tokenizer(path: Path, pad_id: int, max_length: int) -> Any:
    """A tokenizer read once per (file, padding, length), not once per training batch."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=pad_id)
    return tokenizer


def _embed(torch: Any, net: Any, tokens: dict[str, Any], pooling: str | None) -> Any:
    pooled = torch_pool(net(**tokens).last_hidden_state, tokens["attention_mask"], pooling)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _query_vectors(torch: Any, encoder: DualEncoder, net: Any, texts: Sequence[str],
                   max_length: int) -> np.ndarray:
    with torch.no_grad():
        return np.concatenate([
            _embed(torch, net, _tokens(torch, encoder, texts[i:i + 64], max_length),
                   encoder.manifest.pooling).numpy()
            for i in range(0, len(texts), 64)])


def _write(torch: Any, encoder: DualEncoder, net: Any, split: BeirSplit, out: Path,
           tuned: TunedTower, options: QueryTowerOptions) -> None:
    """The model directory: doc graphs, tokenizer and corpus vectors linked (or copied) from
    the base, the query graphs exported, parity of each measured against torch."""
    base = encoder.manifest
    out.mkdir(parents=True, exist_ok=True)
    for name in base.files:
        _link(encoder.path / name, out / name)
    (out / CACHE).mkdir(exist_ok=True)
    for cached in (encoder.path / CACHE).glob("corpus-*"):
        _link(cached, out / CACHE / cached.name)
    # the reference comes first: tracing leaves the module giving other outputs
    reference = _query_vectors(torch, encoder, net, list(PARITY_TEXTS), encoder.max_length)
    _trace_tower(torch, net, encoder, out / QUERY_MODELS["fp32"])
    quantize(out / QUERY_MODELS["fp32"], out / QUERY_MODELS["int8"])
    query_models = {p: QUERY_MODELS[p] for p in PRECISIONS if p in base.models}
    manifest = replace(
        base, name=None, query_models=query_models, docs_from=tuned.base,
        source=f"{tuned.base}, query tower tuned on {split.corpus_path.parent.name} "
               f"({len(tuned.trained)} judged queries)",
        files={**base.files, **{f: sha256(out / f) for f in query_models.values()}},
        parity={})
    write_manifest(out, manifest)
    parity = {}
    for precision in query_models:
        runtime = DualEncoder(out, precision).encode_queries(list(PARITY_TEXTS))
        parity[precision] = {"reference": "torch", "texts": len(PARITY_TEXTS),
                             "query_cosine_min": round(float(
                                 (runtime * reference).sum(axis=1).min()), 6)}
    write_manifest(out, replace(manifest, parity=parity))
    facts = {**asdict(tuned), "path": str(out.name), "options": asdict(options),
             "dataset": split.corpus_path.parent.name}
    (out / TRAINING_FILE).write_text(json.dumps(facts, indent=2, default=str) + "\n",
                                     encoding="utf-8")


def _trace_tower(torch: Any, net: Any, encoder: DualEncoder, path: Path) -> None:
    class _Tokenizer:  # what `_trace` reads of a tokenizer: a call giving tensors
        def __call__(self, texts: list[str], **_: Any) -> dict[str, Any]:
            return _tokens(torch, encoder, texts, 16)

    inputs: list[str] = [i for i in ("input_ids", "attention_mask", "token_type_ids")
                         if i in encoder.manifest.inputs]
    _trace(torch, net, _Tokenizer(), inputs, "last_hidden_state", path)


def _link(source: Path, target: Path) -> None:
    """A hard link when the file system allows one (the doc graphs are 100+ MB), else a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
