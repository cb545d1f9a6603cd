"""`relevance-feedback`: Qdrant 1.17's Relevance Feedback Query, as a peer to TOUR.

Qdrant's description, in
https://qdrant.tech/documentation/search/search-relevance/#relevance-feedback and
https://qdrant.tech/articles/relevance-feedback/: a nearest-neighbour search, a feedback
model (here the labeler) scores a few of its top results, and one more search over the
whole collection ranks every point by the naive strategy's formula

    score(x) = a·sim(q, x) + Σ_pairs confidence^b · c · (sim(pos, x) − sim(neg, x))

over pairs of labelled docs (`es_tour.tour.feedback_pairs` says how they are formed, as
Qdrant's engine forms them). The index's similarity is the inner product of unit vectors
(Elasticsearch's dot_product, OpenSearch's innerproduct; cosine alike), so each term is
linear in x and the formula is one query vector: a·q + Σ c·confidence^b·(pos − neg). The
feedback search is therefore the engine's own kNN with that vector, exact up to the ANN
approximation that any kNN search has, with no rescoring here. The query enters at unit
length, as a cosine collection's target does, so `a` means the same for every query.

The search, at a budget of B labeler pairs (the pairs rerank and TOUR are compared at):

- round 0: kNN with the encoded query, as deep as rerank's first stage (so at k = B both
  label the same docs); its top k are labelled (k ≤ B), and their stored vectors read in
  one ids search. k = B is Qdrant's pattern as written: label the initial top results,
  then search once more;
- round 1: the one feedback search, with the moved vector; where k < B, its first B − k
  docs that no round labelled are labelled too, so no more than B pairs are ever scored.

The final ranking is rerank's rule: every labelled doc first, by the labeler's φ (its
score), then the feedback search's unlabelled docs in its order, with the engine's scores.
A doc the labeler judged keeps that judgement, as in `rerank`; the feedback moves what the
labeler never saw, and, with k < B, which docs it sees.

Defaults (k=10, a=1, b=1, c=1, Qdrant's 3 pairs) were chosen on SciFact's 809 train
queries at B = 20 (docs/retrieval.md): k=10 beat k=B by 0.0075 nDCG@10 there, since at
k = B the labelled top is rerank's own and the feedback reorders only the docs below it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from es_tour.engines import Hit
from es_tour.errors import ConfigError
from es_tour.options import check_int, check_number
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._first_stage import _result, _without_vector
from es_tour.pipeline._registry import register_method
from es_tour.pipeline._types import (
    MethodOptions,
    Provenance,
    RankedHit,
    SearchResult,
    Timings,
    TourRound,
    label_mass,
)
from es_tour.tour import MAX_K, QDRANT_MAX_PAIRS, LabelCache, feedback_pairs, feedback_query

TOP = 10  # a round's trace names this many of its labelled top docs


@dataclass(frozen=True)
class RelevanceFeedbackOptions(MethodOptions):
    budget: int | None = None  # labeler pairs per query at most; None: k
    k: int = 10  # the initial kNN's top docs labelled as feedback (at most the budget)
    a: float = 1.0  # the weight of sim(q, x)
    b: float = 1.0  # the exponent of each pair's confidence
    c: float = 1.0  # the weight of each pair's sim(pos, x) − sim(neg, x)
    pairs: int = QDRANT_MAX_PAIRS  # pairs at most, best with worst by φ

    def __post_init__(self) -> None:
        if self.budget is not None:
            check_int("budget", self.budget, 1, 2 * MAX_K)
        check_int("k", self.k, 1, MAX_K)
        check_number("a", self.a, 0, 100)
        if self.a == 0:
            raise ConfigError("a must be above 0: it weighs the query itself, got 0")
        check_number("b", self.b, 0, 10)
        check_number("c", self.c, 0, 100)
        check_int("pairs", self.pairs, 1, MAX_K)

    @property
    def seeds(self) -> int:
        """The docs round 0 labels: k, at most the budget."""
        return min(self.k, self.budget) if self.budget is not None else self.k

    @property
    def pair_budget(self) -> int:
        return self.budget if self.budget is not None else self.seeds


class RelevanceFeedbackMethod:
    """Label the initial kNN's top docs, then one kNN search with Qdrant's naive feedback
    formula as its query vector; labelled docs first by φ (the module says why)."""

    name = "relevance-feedback"

    def __init__(self, context: SearchContext, options: RelevanceFeedbackOptions):
        self.context = context
        self.options = options

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started, total = time.perf_counter(), Timings()
        options = self.options
        labels = LabelCache()
        provenance = Provenance()
        sources: dict[str, dict[str, Any]] = {}
        q = await self.context.embed_query(query, total)
        q = q / max(float(np.linalg.norm(q)), 1e-12)

        timings, round_started = Timings(), time.perf_counter()
        # as deep as rerank's first stage, so at k = budget both label the same docs
        first = await self.context.knn(q, max(size, options.seeds), timings, returns="keys")
        seeds = first[:options.seeds]
        trace0 = await self._label_round(0, query, first, seeds, labels, provenance, sources,
                                         timings)
        vectors = await self.context.stored_vectors([hit.id for hit in seeds], timings)
        moved = self._moved(q, [hit.id for hit in seeds if hit.id in vectors], vectors, labels,
                            trace0)
        self._close(trace0, timings, round_started, total)

        timings, round_started = Timings(), time.perf_counter()
        rest = options.pair_budget - len(labels)
        depth = min(max(size, len(labels) + rest), MAX_K)
        found = await self.context.knn(moved, depth, timings, returns="keys")
        to_label = [hit for hit in found if hit.id not in labels][:max(rest, 0)]
        trace1 = await self._label_round(1, query, found, to_label, labels, provenance,
                                         sources, timings)
        self._close(trace1, timings, round_started, total)

        ranking = self._final(found, labels, sources, size)
        phis = dict(zip(list(sources), labels.get(list(sources)).tolist(), strict=True))
        return _result(self.name, [provenance.stamp(hit, phis) for hit in ranking],
                       [trace0, trace1], trace0.newly_scored + trace1.newly_scored,
                       2 + bool(seeds), total,
                       started, asdict(options))

    async def _label_round(self, round_no: int, query: str, hits: list[Hit],
                           to_label: list[Hit], labels: LabelCache, provenance: Provenance,
                           sources: dict[str, dict[str, Any]], timings: Timings) -> TourRound:
        """Label `to_label` (of the round's `hits`) and trace the round."""
        new_docs = provenance.add(round_no, [h.id for h in hits], "knn")
        to_label = await self.context.with_text(to_label, timings)
        _, newly = await self.context.label(query, to_label, timings, labels)
        for hit in to_label:
            sources[hit.id] = _without_vector(hit.source, self.context.vector_field)
        ids = [hit.id for hit in self._final(hits, labels, sources, len(hits) + len(sources))]
        phis = dict(zip(list(sources), labels.get(list(sources)).tolist(), strict=True))
        return TourRound(round=round_no, retrieved=len(hits), newly_scored=newly,
                         ranking=ids, new_docs=new_docs,
                         label_mass_at_10=label_mass(ids, phis),
                         top_ids=[hit.id for hit in hits if hit.id in labels][:TOP],
                         labelled=[hit.id for hit in to_label])

    def _moved(self, q: np.ndarray, ids: list[str], vectors: Mapping[str, np.ndarray],
               labels: LabelCache, trace: TourRound) -> np.ndarray:
        """The feedback formula's query vector from the labelled docs `ids`, in the initial
        kNN's order (which breaks ties of φ); q when there are none."""
        if not ids:
            return q
        C, phi = np.stack([vectors[i] for i in ids]), labels.get(ids)
        options = self.options
        moved = feedback_query(q, C, phi, options.a, options.b, options.c, options.pairs)
        pairs = feedback_pairs(phi, options.pairs)
        trace.delta_q_norm = float(np.linalg.norm(moved - q))
        trace.pseudo_positives = [ids[pos] for pos, _, _ in pairs]
        trace.loss_docs = 2 * len(pairs)
        return moved

    @staticmethod
    def _close(trace: TourRound, timings: Timings, round_started: float, total: Timings
               ) -> None:
        timings.total_ms = (time.perf_counter() - round_started) * 1000
        trace.timings = timings
        total.engine_ms += timings.engine_ms
        total.model_ms += timings.model_ms

    def _final(self, hits: Sequence[Hit], labels: LabelCache,
               sources: Mapping[str, dict[str, Any]], size: int) -> list[RankedHit]:
        """Every labelled doc by φ, then `hits`' unlabelled docs in their order."""
        labelled = sorted(sources, key=lambda doc: -labels.get([doc])[0])
        ranked = [RankedHit(doc, float(labels.get([doc])[0]), dict(sources[doc]))
                  for doc in labelled]
        rest = [RankedHit(hit.id, float(hit.score),
                          _without_vector(hit.source, self.context.vector_field))
                for hit in hits if hit.id not in sources]
        return (ranked + rest)[:size]


register_method(
    RelevanceFeedbackMethod.name,
    lambda ctx, o: RelevanceFeedbackMethod(ctx, RelevanceFeedbackOptions.from_mapping(o)),
    "budget",
)
