"""Final-score fusion: a labelling method's pool reranked by φ with its BM25 and kNN scores.

Plain reranking trusts φ alone, and the labeler's errors cap it (labelling deeper stops
paying). The two retrievers' scores of the same docs carry evidence φ lacks; z-scored per
query, the three mix with two weights fitted on train (`python -m es_tour.bench.fusion`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._types import FusionWeights, SearchMethod, SearchResult, Timings
from es_tour.tour import fused_scores

FUSION_DEPTH = 100  # the labelled docs among a method's first this many results are fused


async def pool_scores(context: SearchContext, query: str, ids: Sequence[str],
                      timings: Timings) -> tuple[np.ndarray, np.ndarray]:
    """BM25 and q0·c (the engine's kNN score, an affine map of it) of `ids`, (n,) each.

    Two calls restricted to the pool, so every doc gets both scores: BM25 0 where no
    query term matches, and exact kNN scores from a filter this small.
    """
    if not ids:  # a search that labelled nothing: no call (a kNN of k=0 is a 400)
        return np.zeros(0), np.zeros(0)
    vector = await context.embed_query(query, timings)
    lexical, dense = await asyncio.gather(
        context.bm25(query, len(ids), timings, ids=ids),
        context.knn(vector, len(ids), timings, ids=ids, returns="ids"))
    bm25 = {hit.id: hit.score for hit in lexical}
    knn = {hit.id: hit.score for hit in dense}
    floor = min(knn.values(), default=0.0)
    return (np.array([bm25.get(i, 0.0) for i in ids]),
            np.array([knn.get(i, floor) for i in ids]))


class FusedMethod:
    """A labelling method whose labelled docs are reordered by `fused_scores`; the docs
    below them, which it did not label, keep their order."""

    def __init__(self, inner: SearchMethod, context: SearchContext, weights: FusionWeights):
        self.inner = inner
        self.context = context
        self.weights = weights
        self.name = inner.name

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started = time.perf_counter()
        result = await self.inner.search(query, max(size, FUSION_DEPTH))
        labelled = [hit for hit in result.hits if hit.label is not None]
        rest = [hit for hit in result.hits if hit.label is None]
        timings = Timings()
        calls = 0
        if len(labelled) > 1:
            ids = [hit.id for hit in labelled]
            bm25, dense = await pool_scores(self.context, query, ids, timings)
            calls = 2
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
