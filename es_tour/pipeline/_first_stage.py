"""The first stages, one small class each behind `search(query, size)`: bm25, knn,
hybrid-rrf and hybrid-linear, with the hybrid pools (`linear_hybrid`, `rank_linear`,
`interleave`) and the ranking helpers every method family builds on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import numpy as np

from es_tour.engines import Hit
from es_tour.errors import ConfigError
from es_tour.options import check_int, check_number
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._types import (
    MethodOptions,
    Provenance,
    RankedHit,
    RoundTrace,
    SearchResult,
    Timings,
    label_mass,
)
from es_tour.tour import (
    MAX_K,
    hybrid_scores,
)


@dataclass(frozen=True)
class DepthOptions(MethodOptions):
    k: int = 100  # how many first-stage hits are retrieved (and reranked, by the rerankers)

    def __post_init__(self) -> None:
        check_int("k", self.k, 1, MAX_K)


FIRST_STAGES = ("knn", "bm25", "hybrid-linear")  # what `rerank` may rerank
# hybrid-linear's weight of z(BM25) beside z(q·c): the best on SciFact train with no
# labels, within 0.002 of 0.5 under a labelled pool (docs/retrieval.md)
LEXICAL_WEIGHT = 0.4
LINEAR_DEPTH = 100  # hybrid-linear: the hits each retriever adds to the union it ranks


@dataclass(frozen=True)
class FirstStageOptions(DepthOptions):
    first_stage: str = "knn"  # what rerank reranks: one of FIRST_STAGES
    rrf_k: int = 60  # the constant of reciprocal-rank fusion
    # hybrid-linear: the weight of z(BM25) beside z(q·c), and each retriever's depth
    lexical_weight: float = LEXICAL_WEIGHT
    depth: int = LINEAR_DEPTH

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("rrf_k", self.rrf_k, 0, 10_000)  # 1 / (rrf_k + rank) stays positive
        check_number("lexical_weight", self.lexical_weight, 0, 1)
        check_int("depth", self.depth, 1, MAX_K)
        if self.first_stage not in FIRST_STAGES:
            raise ConfigError(
                f"first_stage must be one of {list(FIRST_STAGES)}, got {self.first_stage!r}"
            )


class Retrieval(NamedTuple):
    """A first stage's hits in retrieval order, the engine calls that took, and the BM25 of
    those whose BM25 it met (a final-score fusion asks the rest)."""

    hits: list[Hit]
    engine_calls: int
    lexical_scores: Mapping[str, float] = MappingProxyType({})


def _ranked(
    ids: Sequence[str], scores: Sequence[float], sources: Mapping[str, Any], size: int
) -> list[RankedHit]:
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:size]
    return [RankedHit(ids[i], float(scores[i]), dict(sources.get(ids[i], {}))) for i in order]


def _ranked_then_rest(
    hits: Sequence[Hit], scores: Sequence[float], sources: Mapping[str, Any], size: int
) -> list[RankedHit]:
    """The first len(scores) hits by score, then the rest in retrieval order with their
    engine scores: a rerank window on top, as Elasticsearch's rescore orders it."""
    window = [h.id for h in hits[: len(scores)]]
    ranked = _ranked(window, scores, sources, size)
    seen = set(window)
    rest = [RankedHit(h.id, float(h.score), dict(sources.get(h.id, {})))
            for h in hits[len(scores):] if h.id not in seen]
    return (ranked + rest)[:size]


def _result(
    method: str,
    hits: list[RankedHit],
    rounds: list[RoundTrace],
    pairs: int,
    calls: int,
    timings: Timings,
    started: float,
    parameters: dict[str, Any],
    lexical_scores: Mapping[str, float] = MappingProxyType({}),
) -> SearchResult:
    timings.total_ms = (time.perf_counter() - started) * 1000
    return SearchResult(method, hits, rounds, pairs, calls, timings, parameters,
                        lexical_scores=dict(lexical_scores))


class _FirstStage:
    """Methods that run one retrieval (two, for hybrid) and maybe one rerank."""

    name: ClassVar[str]
    labelled: ClassVar[bool] = False  # whether `_score` gives the labeler's φ

    def __init__(self, context: SearchContext, options: DepthOptions):
        self.context = context
        self.options = options

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started, timings = time.perf_counter(), Timings()
        provenance = Provenance()
        hits, calls, lexical_scores = await self._retrieve(
            query, max(size, self.options.k), timings, provenance)
        hits = await self._read(hits, timings)
        scores, pairs = await self._score(query, hits, timings)
        # the window's φ, for the trace; the other methods' scores are no labels
        labels = dict(zip([h.id for h in hits], scores, strict=False)) if self.labelled else {}
        sources = {h.id: _without_vector(h.source, self.context.vector_field) for h in hits}
        ranking = [provenance.stamp(hit, labels)
                   for hit in _ranked_then_rest(hits, scores, sources, size)]
        ids = [h.id for h in ranking]
        trace = RoundTrace(round=0, retrieved=len(hits), newly_scored=pairs, timings=timings,
                           ranking=ids, new_docs=len(provenance),
                           label_mass_at_10=label_mass(ids, labels))
        return _result(self.name, ranking, [trace], pairs, calls, timings, started,
                       self._parameters(), lexical_scores)

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k}

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        """The hits in retrieval order and the engine calls made; each retrieval is
        recorded in `provenance` as round 0."""
        raise NotImplementedError

    async def _read(self, hits: list[Hit], timings: Timings) -> list[Hit]:
        """`hits` with what `_score` reads of them: retrieval's ids and scores suffice
        unless a labeler reads a window's text."""
        return hits

    async def _score(
        self, query: str, hits: list[Hit], timings: Timings
    ) -> tuple[list[float], int]:
        """Scores of a prefix of `hits` (all of them, or a rerank window), and pairs scored."""
        return [h.score for h in hits], 0


def _recorded(hits: list[Hit], retriever: str, provenance: Provenance) -> list[Hit]:
    provenance.add(0, [h.id for h in hits], retriever)
    return hits


async def _legs(context: SearchContext, query: str, vector: np.ndarray, lexical_k: int,
                dense_k: int, timings: Timings, provenance: Provenance, *, keyed: bool = True,
                scored: bool = False) -> tuple[list[Hit], list[Hit]]:
    """BM25's and kNN's hits (doc keys, or with `keyed` False `_id`s, and scores), asked
    together: one round trip. `scored`: each hit with the other's score too, where the
    engine can (`SearchContext.hybrid_legs`), for a pool that ranks by both."""
    both = (await context.hybrid_legs(vector, context.lexical_dsl(query), lexical_k, timings)
            if scored and keyed and lexical_k == dense_k else None)
    lexical, dense = both or await asyncio.gather(
        context.bm25(query, lexical_k, timings, keyed=keyed),
        context.knn(vector, dense_k, timings, returns="keys" if keyed else "ids"))
    return _recorded(lexical, "bm25", provenance), _recorded(dense, "knn", provenance)


class Bm25Method(_FirstStage):
    name = "bm25"

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        return Retrieval(_recorded(await self.context.bm25(query, k, timings), "bm25",
                                   provenance), 1)


class KnnMethod(_FirstStage):
    name = "knn"

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        vector = await self.context.embed_query(query, timings)
        hits = await self.context.knn(vector, k, timings, returns="keys")
        return Retrieval(_recorded(hits, "knn", provenance), 1)


class HybridRrfMethod(_FirstStage):
    """Reciprocal-rank fusion of BM25 and kNN, computed here so both engines agree."""

    name = "hybrid-rrf"
    options: FirstStageOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        vector = await self.context.embed_query(query, timings)
        lexical, dense = await _legs(self.context, query, vector, k, k, timings, provenance)
        fused: dict[str, float] = {}
        by_id: dict[str, Hit] = {}
        for ranking in (lexical, dense):
            for rank, hit in enumerate(ranking, start=1):
                fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (self.options.rrf_k + rank)
                by_id.setdefault(hit.id, hit)
        return Retrieval([replace(by_id[i], score=s, vector=None) for i, s in fused.items()],
                         2)


class HybridLinearMethod(_FirstStage):
    """BM25 and kNN, each `depth` deep, their union ranked by `hybrid_scores`: a
    convex combination of z-scored BM25 and kNN scores, exact for every doc in the union."""

    name = "hybrid-linear"
    options: FirstStageOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        return await linear_hybrid(self.context, query, k, self.options, timings, provenance)

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k, "lexical_weight": self.options.lexical_weight}


async def linear_hybrid(context: SearchContext, query: str, k: int, options: FirstStageOptions,
                        timings: Timings, provenance: Provenance) -> Retrieval:
    """The union of BM25's and kNN's top `depth`, best first by `hybrid_scores`, then (for
    k past it) their next hits in turn at the union's lowest score, so a deeper page never
    reorders the first; and the engine calls made (`rank_linear` adds up to two)."""
    depth = options.depth
    vector = await context.embed_query(query, timings)
    lexical, dense = await _legs(context, query, vector, max(k, depth), max(k, depth), timings,
                                 provenance, scored=True)
    ranked, calls = await rank_linear(context, vector, dense[:depth], lexical[:depth],
                                      _bm25_of(context, query, timings),
                                      options.lexical_weight, timings)
    fused = {hit.id for hit in ranked}
    floor = ranked[-1].score if ranked else 0.0
    rest = [hit.rescored(floor)
            for hit in interleave(dense[depth:], lexical[depth:]) if hit.id not in fused]
    return Retrieval(ranked + rest, 2 + calls)


async def rank_linear(context: SearchContext, vector: np.ndarray, dense: Sequence[Hit],
                      lexical: Sequence[Hit],
                      bm25_of: Callable[[list[str]], Awaitable[list[Hit]]],
                      lexical_weight: float, timings: Timings) -> tuple[list[Hit], int]:
    """The union of `dense` (`context.knn`'s hits for `vector`) and `lexical`, best first by
    `hybrid_scores` with `lexical_weight`, and the engine calls made (`linear_union`)."""
    union, bm25, knn, calls = await linear_union(context, vector, dense, lexical, bm25_of,
                                                 timings)
    scores = hybrid_scores(bm25, knn, lexical_weight)
    order = np.argsort(-scores, kind="stable")
    return [union[i].rescored(float(scores[i])) for i in order], calls


async def linear_union(context: SearchContext, vector: np.ndarray, dense: Sequence[Hit],
                       lexical: Sequence[Hit],
                       bm25_of: Callable[[list[str]], Awaitable[list[Hit]]], timings: Timings
                       ) -> tuple[list[Hit], np.ndarray, np.ndarray, int]:
    """The union of `dense` (`context.knn`'s hits for `vector`) and `lexical`, each doc's
    BM25 and kNN score, and the engine calls made: at once, `bm25_of` gives the dense-only
    docs their BM25 (0 where no query term matches) and a kNN call restricted to the
    lexical-only docs their kNN score (exact from a filter this small).

    The dense side is the engine's kNN score, as fusion's: an increasing map of q·c,
    affine (so the z-score makes it q·c's own) for Elasticsearch's dot_product and cosine
    and for OpenSearch's innerproduct where q·c ≥ 0. No stored vector crosses the wire:
    each is ~8 KB of JSON at 384 dimensions.
    """
    union = interleave(dense, lexical)
    # legs asked with each other's scores (`SearchContext.hybrid_legs`) need no more calls
    bm25, knn = leg_scores(lexical, dense), leg_scores(dense, lexical)
    dense_only = [hit.id for hit in union if hit.id not in bm25]
    lexical_only = [hit.id for hit in union if hit.id not in knn]

    async def knn_of(ids: list[str]) -> list[Hit]:
        return await context.knn(vector, len(ids), timings, ids=ids, returns="ids")

    async def none() -> list[Hit]:
        return []

    more_bm25, more_knn = await asyncio.gather(bm25_of(dense_only) if dense_only else none(),
                                               knn_of(lexical_only) if lexical_only else none())
    bm25 |= {hit.id: hit.score for hit in more_bm25}
    knn |= {hit.id: hit.score for hit in more_knn}
    floor = min(knn.values(), default=0.0)  # a doc with no stored vector: kNN's last
    return (union, np.array([bm25.get(hit.id, 0.0) for hit in union]),
            np.array([knn.get(hit.id, floor) for hit in union]),
            int(bool(dense_only)) + int(bool(lexical_only)))


def leg_scores(own: Sequence[Hit], other: Sequence[Hit]) -> dict[str, float]:
    """Each doc's score by the retriever of the leg `own`: its hits' own scores, and the
    score `other`'s hits brought of it (`Hit.other_score`), where they did."""
    return {**{hit.id: hit.other_score for hit in other if hit.other_score is not None},
            **{hit.id: hit.score for hit in own}}


async def linear_scores(context: SearchContext, query: str, timings: Timings,
                        depth: int = LINEAR_DEPTH) -> tuple[list[str], np.ndarray, np.ndarray]:
    """hybrid-linear's union for `query` (BM25's and kNN's top `depth`) with each doc's
    BM25 and kNN score, before any weight ranks it: what a fit of `lexical_weight` reads."""
    vector = await context.embed_query(query, timings)
    lexical, dense = await _legs(context, query, vector, depth, depth, timings, Provenance(),
                                 keyed=False)  # the fit reads them beside judged `_id`s
    union, bm25, knn, _ = await linear_union(context, vector, dense, lexical,
                                             _bm25_of(context, query, timings), timings)
    return [hit.id for hit in union], bm25, knn


def _bm25_of(context: SearchContext, query: str, timings: Timings
             ) -> Callable[[list[str]], Awaitable[list[Hit]]]:
    """BM25's scores for `query` of the docs given, as `linear_union` asks for them."""

    async def bm25_of(ids: list[str]) -> list[Hit]:
        return await context.bm25(query, len(ids), timings, ids=ids)

    return bm25_of


def interleave(*rankings: Sequence[Hit]) -> list[Hit]:
    """Each ranking's next unseen hit in turn until all are spent: a union that keeps
    every ranking's order and gives each an equal share of any prefix."""
    merged: dict[str, Hit] = {}
    pending = [iter(ranking) for ranking in rankings]
    while pending:
        for ranking in list(pending):
            hit = next((h for h in ranking if h.id not in merged), None)
            if hit is None:
                pending.remove(ranking)
            else:
                merged[hit.id] = hit
    return list(merged.values())


def _without_vector(source: Mapping[str, Any], vector_field: str) -> dict[str, Any]:
    return {key: value for key, value in source.items() if key != vector_field}
