"""The rerankers: rerank and rerank-hybrid (the labeler over a first stage's top-k, or
over a BM25 ∪ kNN pool), and vector-rerank (BM25's top-k by the stored vectors, no
labeler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from es_tour.engines import Hit
from es_tour.options import check_number
from es_tour.pipeline._first_stage import (
    DepthOptions,
    FirstStageOptions,
    Retrieval,
    _FirstStage,
    _legs,
    _recorded,
    interleave,
    leg_scores,
    linear_hybrid,
)
from es_tour.pipeline._types import (
    Provenance,
    Timings,
)
from es_tour.tour import (
    LabelCache,
    final_scores,
)


class _Rerank(_FirstStage):
    """The labeler over the top-k of what `_retrieve` returns."""

    labelled = True

    async def _read(self, hits: list[Hit], timings: Timings) -> list[Hit]:
        window = self.options.k
        return [*await self.context.with_text(hits[:window], timings), *hits[window:]]

    async def _score(
        self, query: str, hits: list[Hit], timings: Timings
    ) -> tuple[list[float], int]:
        window = hits[: self.options.k]
        phi, pairs = await self.context.label(query, window, timings, LabelCache())
        return phi.tolist(), pairs


class RerankMethod(_Rerank):
    """The labeler over the first stage's top-k."""

    name = "rerank"
    options: FirstStageOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        if self.options.first_stage == "bm25":
            hits = await self.context.bm25(query, k, timings, keyed=True)
            return Retrieval(_recorded(hits, "bm25", provenance), 1)
        if self.options.first_stage == "hybrid-linear":
            return await linear_hybrid(self.context, query, k, self.options, timings,
                                       provenance)
        vector = await self.context.embed_query(query, timings)
        hits = await self.context.knn(vector, k, timings, returns="keys")
        return Retrieval(_recorded(hits, "knn", provenance), 1)

    def _parameters(self) -> dict[str, Any]:
        stage = self.options.first_stage
        return {"k": self.options.k, "first_stage": stage,
                **({"lexical_weight": self.options.lexical_weight}
                   if stage == "hybrid-linear" else {})}


class RerankHybridMethod(_Rerank):
    """The labeler over a pool of k docs that BM25 and kNN fill in turn.

    The pool is the first k docs of the two rankings interleaved (kNN first, each doc
    once), so each contributes k/2 and a doc both retrieve frees a place for the next.
    The pool is ranked by φ; the rest of the interleave fills the depth below it.
    """

    name = "rerank-hybrid"

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        vector = await self.context.embed_query(query, timings)
        # each leg with the other's score where the engine can: the kNN leg's BM25 then
        # spares a final-score fusion its own search of the pool's BM25
        lexical, dense = await _legs(self.context, query, vector, k, k, timings, provenance,
                                     scored=True)
        return Retrieval(interleave(dense, lexical), 2, leg_scores(lexical, dense))


@dataclass(frozen=True)
class VectorRerankOptions(DepthOptions):
    mu: float = 0.5  # the weight of the vector score (BERTserini's μ)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("mu", self.mu, 0, 1)


class VectorRerankMethod(_FirstStage):
    """BM25's top-k reranked by q·c over the stored retriever vectors: no labeler pairs.

    The score is (1−μ)·minmax(BM25) + μ·minmax(q·c) over the k hits, the linear
    interpolation of BERTserini (Yang et al. 2019) with its μ = 0.5. The engine gives each
    hit its q·c with the BM25 search, where a script can (`SearchContext.hybrid_legs`,
    the unit q: min-max is the same); else the hits come with their stored vectors.
    """

    name = "vector-rerank"
    options: VectorRerankOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> Retrieval:
        legs = None
        if self.context.vector_similarity is not None:  # a script may give each hit its q·c
            vector = await self.context.embed_query(query, timings)
            legs = await self.context.hybrid_legs(vector, self.context.lexical_dsl(query), k,
                                                  timings, dense=False)
        if legs is not None and all(hit.other_score is not None for hit in legs[0]):
            return Retrieval(_recorded(legs[0], "bm25", provenance), 1)
        # a hit without a vector the script reads: every hit's stored vector instead
        hits = await self.context.bm25(query, k, timings, with_vectors=True)
        return Retrieval(_recorded(hits, "bm25", provenance), 1 + (legs is not None))

    async def _score(
        self, query: str, hits: list[Hit], timings: Timings
    ) -> tuple[list[float], int]:
        window = hits[: self.options.k]
        if not window:
            return [], 0
        if all(hit.other_score is not None for hit in window):  # the engine's q·c
            similarities = np.array([hit.other_score for hit in window])
        else:
            q = await self.context.embed_query(query, timings)
            stored = self.context.stored_vectors_of(window)
            similarities = np.stack([stored[h.id] for h in window]) @ q
        bm25 = np.array([h.score for h in window])
        return final_scores(similarities, bm25, self.options.mu).tolist(), 0

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k, "mu": self.options.mu}
