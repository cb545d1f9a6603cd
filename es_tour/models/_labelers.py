"""Labelers: a relevance score φ(query, doc), computed once per query, index, doc id and text.

A dual encoder's doc vector does not depend on the query, so it is embedded once per
(index, doc id, text digest) and reused by every later query that reaches the doc.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from cachetools import LRUCache

from es_tour.errors import ConfigError
from es_tour.models._manifest import MANIFEST, read_manifest
from es_tour.models._runtime import QUERY_THREADS, CrossEncoder, DualEncoder, l2_normalize
from es_tour.paths import models_dir

DEFAULT_CACHED_QUERIES = 256
# scores held across the cached queries (~250 bytes each): one query may label thousands
DEFAULT_CACHED_PAIRS = 200_000
# doc vectors a dual-encoder labeler keeps, least recently used dropped first: 4 bytes per
# dimension each, so ~75 MB at 384 dimensions and ~150 MB at 768 when full
DEFAULT_CACHED_DOCS = 50_000
# docs embedded in one shared batch at most: what one search's batches wait behind
DEFAULT_BATCH_DOCS = 64


@runtime_checkable
class Labeler(Protocol):
    """Scores documents for a query; `pairs_scored` counts the new pairs scored so far.

    One pair is one new (query, index, doc id, text): a cross-encoder run, or a dual
    encoder's dot product of the query with the doc's vector (the doc is embedded only the
    first time any query reaches it). Scores already computed for them are reused.
    """

    name: str
    pairs_scored: int

    def score(self, query: str, docs: Sequence[tuple[str, str]], index: str = "") -> np.ndarray:
        """docs: n (doc_id, text) of `index` -> (n,) float32 scores in the docs' order."""
        ...


DocKey = tuple[str, str, bytes]  # (index, doc id, digest of the text)


def doc_key(index: str, doc_id: str, text: str) -> DocKey:
    """What a label or a doc vector is kept under: a doc whose text changed is new."""
    return index, doc_id, hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()


class _CachedLabeler:
    """Per-query score cache shared by the labelers; keeps the most recent queries, at most
    `cached_queries` of them and `cached_pairs` scores in all.

    A score is kept under (index, doc id, text digest): the same id in another index, or a
    doc whose text changed, is scored afresh. Safe to call from several threads (the
    sidecar's model pool): the cache is updated under a lock, the model runs outside it.
    """

    def __init__(self, name: str, cached_queries: int = DEFAULT_CACHED_QUERIES,
                 cached_pairs: int = DEFAULT_CACHED_PAIRS) -> None:
        if cached_queries < 1 or cached_pairs < 1:
            raise ConfigError(f"cached_queries [{cached_queries}] and cached_pairs "
                              f"[{cached_pairs}] must be >= 1")
        self.name = name
        self.pairs_scored = 0
        self._cached_queries = cached_queries
        self._cached_pairs = cached_pairs
        self._cache: OrderedDict[str, dict[DocKey, float]] = OrderedDict()
        self._lock = threading.Lock()

    def score(self, query: str, docs: Sequence[tuple[str, str]], index: str = "") -> np.ndarray:
        """docs: n (doc_id, text) of `index` -> (n,) float32 scores in the docs' order."""
        scores = self._scored(query, docs, index, self._score_new)
        assert scores is not None
        return scores

    def _scored(self, query: str, docs: Sequence[tuple[str, str]], index: str,
                score_new: Callable[[str, list[DocKey], list[str]], np.ndarray | None]
                ) -> np.ndarray | None:
        """`score`, with the pairs not cached scored by `score_new`; None where it gives
        none."""
        keys = [doc_key(index, doc_id, text) for doc_id, text in docs]
        with self._lock:
            known = self._remembered(query, self._cache, dict)
            new = {key: text for key, (_, text) in zip(keys, docs, strict=True)
                   if key not in known}
        if new:
            fresh = score_new(query, list(new), list(new.values()))
            if fresh is None:
                return None
            with self._lock:
                known.update(zip(new, fresh.tolist(), strict=True))
                self.pairs_scored += len(new)
                self._trim_scores()
        return np.array([known[key] for key in keys], dtype=np.float32)

    def _trim_scores(self) -> None:
        """Drop the least recent queries' scores while more than `cached_pairs` are held;
        the most recent query keeps its own. Call with the lock held."""
        held = sum(map(len, self._cache.values()))
        while held > self._cached_pairs and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            held -= len(dropped)

    def _remembered(self, query: str, cache: OrderedDict[str, Any], make: Any) -> Any:
        """cache[query], made with `make()` when absent, as the most recent of at most
        `cached_queries` entries. Call with the lock held."""
        if query in cache:
            cache.move_to_end(query)
            return cache[query]
        value = cache[query] = make()
        while len(cache) > self._cached_queries:
            cache.popitem(last=False)
        return value

    @property
    def cached_queries(self) -> int:
        return self._cached_queries

    def clear_cache(self) -> None:
        """Forget every cached score; `pairs_scored` keeps counting."""
        with self._lock:
            self._cache.clear()

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        """φ of the docs `keys` names, whose texts are `texts`: (n,) float32."""
        raise NotImplementedError


class CrossEncoderLabeler(_CachedLabeler):
    """φ = the cross-encoder's score of (query, doc text)."""

    def __init__(
        self, encoder: CrossEncoder, name: str | None = None,
        cached_queries: int = DEFAULT_CACHED_QUERIES,
    ) -> None:
        super().__init__(name or encoder.manifest.name or encoder.path.name, cached_queries)
        self.encoder = encoder

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        return self.encoder.score(query, texts)


class DualEncoderLabeler(_CachedLabeler):
    """φ = cosine of the query embedding (computed once per query) and each doc's.

    A doc is embedded once per (index, doc id, text digest) while it is among the
    `cached_docs` most recently used; `docs_embedded` counts the docs the model ran on.
    """

    def __init__(
        self, encoder: DualEncoder, name: str | None = None,
        cached_queries: int = DEFAULT_CACHED_QUERIES, cached_docs: int = DEFAULT_CACHED_DOCS,
        batch_docs: int = DEFAULT_BATCH_DOCS,
    ) -> None:
        super().__init__(name or encoder.manifest.name or encoder.path.name, cached_queries)
        if cached_docs < 1 or batch_docs < 1:
            raise ConfigError(f"cached_docs [{cached_docs}] and batch_docs [{batch_docs}] "
                              "must be >= 1")
        self.encoder = encoder
        self.docs_embedded = 0
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._doc_vectors: LRUCache[DocKey, np.ndarray] = LRUCache(maxsize=cached_docs)
        self._batches = _SharedBatches(self._embed, batch_docs)

    @property
    def queued_docs(self) -> int:
        """Docs waiting for the model behind the batch it is running now."""
        return self._batches.queued

    @property
    def store_name(self) -> str:
        """The name its doc vectors are kept under: its doc tower's registry model for a
        labeler whose query tower was tuned apart (it reads the vectors the base stored)."""
        return self.encoder.manifest.docs_from or self.name

    @property
    def fingerprint(self) -> str:
        """A digest of the encoder's `doc_encoding`. Vectors kept outside this process (the
        engine's store) are kept under it, so another model's are never read as this one's."""
        return hashlib.sha256(json.dumps(self.encoder.doc_encoding).encode()).hexdigest()[:12]

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        return np.asarray(self.doc_vectors(keys, texts) @ self.query_vector(query))

    def score_held(self, query: str, docs: Sequence[tuple[str, str]], index: str = ""
                   ) -> np.ndarray | None:
        """`score`'s answer where no model need run for it (the query's vector and every
        new doc's are in memory: a dot product of microseconds, which a sidecar runs on
        its event loop rather than hand to a thread); None otherwise."""
        return self._scored(query, docs, index, self._held_scores)

    def _held_scores(self, query: str, keys: list[DocKey], texts: list[str]
                     ) -> np.ndarray | None:
        with self._lock:
            q = self._query_vectors.get(query)
            vectors = [vector for key in keys if (vector := self._doc_vectors.get(key)) is not None]
        if q is None or len(vectors) < len(keys):
            return None
        return np.asarray(np.stack(vectors) @ q)

    def held(self, keys: Sequence[DocKey]) -> dict[DocKey, np.ndarray]:
        """The doc vectors of `keys` in memory now (none is embedded)."""
        with self._lock:
            return {key: vector for key in keys
                    if (vector := self._doc_vectors.get(key)) is not None}

    def remember(self, vectors: Mapping[DocKey, np.ndarray]) -> None:
        """Keep doc vectors computed elsewhere (the engine's store) as if embedded here."""
        with self._lock:
            for key, vector in vectors.items():
                self._doc_vectors[key] = vector

    def doc_vectors(self, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        """(n, d) unit vectors of the docs: cached ones reused, the rest embedded in batches
        shared with the other threads labelling now (`_SharedBatches`)."""
        held = self.held(keys)
        new = {key: text for key, text in zip(keys, texts, strict=True) if key not in held}
        if new:
            held.update(self._batches.vectors(new))
        return np.stack([held[key] for key in keys])

    def _embed(self, docs: Mapping[DocKey, str]) -> np.ndarray:
        """One shared batch through the model, kept in the cache."""
        embedded = l2_normalize(self.encoder.encode_docs(list(docs.values())))
        with self._lock:
            self.docs_embedded += len(docs)
            for key, vector in zip(docs, embedded, strict=True):
                self._doc_vectors[key] = vector
        return embedded

    def query_vector(self, query: str) -> np.ndarray:
        """The query's unit embedding, computed once per cached query."""
        with self._lock:
            q = self._query_vectors.get(query)
        if q is None:
            q = l2_normalize(self.encoder.encode_queries([query]))[0]
            with self._lock:
                self._remembered(query, self._query_vectors, lambda: q)
        return q

    def clear_cache(self) -> None:
        """Forget every cached score and vector (a cold start); the counters keep counting."""
        super().clear_cache()
        with self._lock:
            self._query_vectors.clear()
            self._doc_vectors.clear()


class _SharedBatches:
    """Doc embedding shared by the threads that label at once (the sidecar's model pool).

    A doc that several searches need at the same time is embedded once. The model runs one
    batch at a time: a thread that finds it busy queues its docs, and when the batch ends
    one waiting thread runs the next, up to `batch_docs` of the queued docs whoever asked
    for them. One run already uses every core, so runs side by side only contend, while
    a shared batch pads and dispatches once.
    """

    def __init__(self, embed: Callable[[Mapping[DocKey, str]], np.ndarray], batch_docs: int):
        self._embed = embed
        self._batch_docs = batch_docs
        self._changed = threading.Condition()
        self._queue: OrderedDict[DocKey, str] = OrderedDict()
        self._wanted: dict[DocKey, Future[np.ndarray]] = {}  # queued or running
        self._running = False

    @property
    def queued(self) -> int:
        with self._changed:
            return len(self._queue)

    def vectors(self, docs: Mapping[DocKey, str]) -> dict[DocKey, np.ndarray]:
        """The docs' vectors, embedded by this thread or by another that took them."""
        with self._changed:
            mine = {}
            for key, text in docs.items():
                if key not in self._wanted:
                    self._wanted[key] = Future()
                    self._queue[key] = text
                mine[key] = self._wanted[key]
        def finished() -> bool:
            return all(future.done() for future in mine.values())

        while True:
            with self._changed:
                self._changed.wait_for(lambda: finished() or not self._running)
                if finished():
                    break
                # idle with some of ours unfinished: they are queued, so run the next batch
                self._running = True
                batch = dict(self._queue.popitem(last=False)
                             for _ in range(min(self._batch_docs, len(self._queue))))
            self._run(batch)
        return {key: future.result() for key, future in mine.items()}

    def _run(self, batch: dict[DocKey, str]) -> None:
        try:
            outcome: np.ndarray | BaseException = self._embed(batch)
        except BaseException as exc:  # every thread waiting on the batch gets the error
            outcome = exc
        with self._changed:
            for row, key in enumerate(batch):
                future = self._wanted.pop(key)
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome[row])
            self._running = False
            self._changed.notify_all()


def load_model_labeler(
    name: str = "default", precision: str | None = None, threads: int | None = None
) -> Labeler:
    """The labeler of one registry model ("default" is the chosen offline labeler) or model
    directory (any exported dual or cross model; its kind is read from the manifest).

    A registry model must be built (`es-tour models build NAME`); its precision defaults
    to the registry's choice, a directory's to fp32.
    """
    path, registry_name = model_directory(name)
    kind = read_manifest(path).kind
    chosen = precision or labeler_precision(name)
    label = registry_name or path.name
    if kind == "cross":
        return CrossEncoderLabeler(CrossEncoder(path, chosen, threads), label)
    return DualEncoderLabeler(DualEncoder(path, chosen, threads), label)


def labeler_encoder(name: str = "default", max_length: int | None = None,
                    threads: int | None = None, precision: str | None = None) -> DualEncoder:
    """The dual encoder a model labels with (a registry name or a model directory), at
    `precision` (default: its labeler precision); `max_length` cuts docs shorter than the
    model's (docs/benchmarks/doc-length.md: on SciFact train, 384 tokens already cost 0.005
    nDCG@10, so the labeler reads all 512)."""
    return DualEncoder(model_directory(name)[0], precision or labeler_precision(name),
                       threads=threads, max_length=max_length)


def query_encoder(name: str) -> DualEncoder:
    """The dual encoder a search's kNN legs embed its query with, and an index's docs are
    embedded with (a registry name or a model directory): one thread, at the registry's
    query and doc precisions (a directory's: fp32)."""
    from onnx_models import spec

    path, registry_name = model_directory(name)
    if registry_name is None:
        return DualEncoder(path, threads=QUERY_THREADS)
    recipe = spec(registry_name)
    return DualEncoder(path, recipe.doc_precision, threads=QUERY_THREADS,
                       query_precision=recipe.query_precision)


def model_path(name: str) -> Path:
    """The cache directory of a registry model or alias; it may not be built yet."""
    from onnx_models import resolve

    return models_dir() / resolve(name)


def model_directory(name: str) -> tuple[Path, str | None]:
    """A registry name or alias -> (its directory, its registry name); a path to a model
    directory, or the name of one in the model cache (what `es-tour train-labeler` and
    `train-reranker` write there) -> (that path, None). Anything else is a ConfigError
    naming the choices."""
    from onnx_models import ALIASES, MODELS, resolve

    if name in MODELS or name in ALIASES:
        return model_path(name), resolve(name)
    if os.sep not in name and (models_dir() / name / MANIFEST).is_file():
        return models_dir() / name, None
    path = Path(name).expanduser()
    if path.exists() or os.sep in name:
        return path, None
    raise ConfigError(
        f"unknown model [{name}]; choose one of: {', '.join([*MODELS, *ALIASES])}, "
        "or give the path of a model directory"
    )


def labeler_precision(name: str) -> str:
    """The precision a model labels at: the registry's choice; for a directory, its doc
    tower's registry model's (a tuned query tower, `docs_from`), else fp32."""
    from onnx_models import MODELS, spec

    path, registry_name = model_directory(name)
    if registry_name is None:
        docs_from = read_manifest(path).docs_from if path.is_dir() else None
        if docs_from not in MODELS:
            return "fp32"
        registry_name = docs_from
    return spec(registry_name).labeler_precision
