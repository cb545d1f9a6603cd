"""Final-score fusion: a labelling method's pool reranked by φ with its BM25 and kNN scores.

Plain reranking trusts φ alone, and the labeler's errors cap it (labelling deeper stops
paying). The two retrievers' scores of the same docs carry evidence φ lacks; z-scored per
query, the three mix with two weights fitted on train (`python -m es_tour.bench.fusion`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from es_tour.engines import Hit
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._types import FusionWeights, SearchMethod, SearchResult, Timings
from es_tour.tour import fused_scores

FUSION_DEPTH = 100  # the labelled docs among a method's first this many results are fused


async def pool_scores(context: SearchContext, query: str, ids: Sequence[str],
                      timings: Timings, *, known_bm25: Mapping[str, float] | None = None,
                      lexical: bool = True, dense: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, int]:
    """BM25 and q0·c (the engine's kNN score, an affine map of it) of `ids`, (n,) each,
    and the searches asked.

    Calls restricted to the pool, asked together, so every doc gets both scores: BM25 0
    where no query term matches, and exact kNN scores from a filter this small. BM25 is
    asked only for docs `known_bm25` lacks; a side not wanted (its weight 0) is not asked
    and reads 0.
    """
    known = dict(known_bm25 or {})
    unknown = [i for i in ids if i not in known] if lexical else []
    if not ids or not (unknown or dense):  # nothing to ask (a kNN of k=0 is a 400)
        return np.array([known.get(i, 0.0) for i in ids]), np.zeros(len(ids)), 0
    vector = await context.embed_query(query, timings) if dense else None

    async def none() -> list[Hit]:
        return []

    found_lexical, found_dense = await asyncio.gather(
        context.bm25(query, len(unknown), timings, ids=unknown) if unknown else none(),
        context.knn(vector, len(ids), timings, ids=ids, returns="ids")
        if vector is not None else none())
    bm25 = {**known, **dict.fromkeys(unknown, 0.0),
            **{hit.id: hit.score for hit in found_lexical}}
    knn = {hit.id: hit.score for hit in found_dense}
    floor = min(knn.values(), default=0.0)
    return (np.array([bm25.get(i, 0.0) for i in ids]),
            np.array([knn.get(i, floor) for i in ids]), bool(unknown) + (vector is not None))


class FusedMethod:
    """A labelling method whose labelled docs are reordered by `fused_scores`; the docs
    below them, which it did not label, keep their order."""

    def __init__(self, inner: SearchMethod, context: SearchContext, weights: FusionWeights):
        self.inner = inner
        self.context = context
        self.weights = weights
        self.name = inner.name
        if weights.w_bm25 and hasattr(inner, "scores_lexical"):  # spares a round trip
            inner.scores_lexical = True

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started = time.perf_counter()
        result = await self.inner.search(query, max(size, FUSION_DEPTH))
        labelled = [hit for hit in result.hits if hit.label is not None]
        rest = [hit for hit in result.hits if hit.label is None]
        timings = Timings()
        calls = 0
        if len(labelled) > 1:
            ids = [hit.id for hit in labelled]
            weights = self.weights
            bm25, dense, calls = await pool_scores(
                self.context, query, ids, timings, known_bm25=result.lexical_scores,
                lexical=weights.w_bm25 != 0, dense=weights.w_dense != 0)
            scores = fused_scores(np.array([hit.label for hit in labelled]), bm25, dense,
                                  self.weights.w_bm25, self.weights.w_dense)
            order = np.argsort(-scores, kind="stable")
            labelled = [replace(labelled[i], score=float(scores[i])) for i in order]
        total = result.timings
        total.engine_ms += timings.engine_ms
        total.model_ms += timings.model_ms
        total.total_ms = (time.perf_counter() - started) * 1000
        return replace(result, hits=[*labelled, *rest][:size],
                       engine_calls=result.engine_calls + calls,
                       parameters={**result.parameters, "w_bm25": self.weights.w_bm25,
                                   "w_dense": self.weights.w_dense})
