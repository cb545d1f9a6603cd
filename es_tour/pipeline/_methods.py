"""Named search methods, one small class each, all behind `search(query, size)`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Protocol

import numpy as np

from es_tour.engines import Hit
from es_tour.errors import ConfigError
from es_tour.options import check_int, check_number
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._fusion import FusedMethod
from es_tour.pipeline._types import (
    FusionWeights,
    MethodOptions,
    Provenance,
    RankedHit,
    RoundTrace,
    SearchMethod,
    SearchResult,
    Timings,
    TourRound,
    label_mass,
)
from es_tour.tour import (
    MAX_K,
    LabelCache,
    QueryOptimizer,
    TourConfig,
    final_scores,
    hybrid_scores,
    rocchio,
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
) -> SearchResult:
    timings.total_ms = (time.perf_counter() - started) * 1000
    return SearchResult(method, hits, rounds, pairs, calls, timings, parameters)


@dataclass(frozen=True)
class VectorRerankOptions(DepthOptions):
    mu: float = 0.5  # the weight of the vector score (BERTserini's μ)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("mu", self.mu, 0, 1)


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
        hits, calls = await self._retrieve(query, max(size, self.options.k), timings,
                                           provenance)
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
        return _result(
            self.name,
            ranking,
            [trace],
            pairs,
            calls,
            timings,
            started,
            self._parameters(),
        )

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k}

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        """The hits in retrieval order and the engine calls made; each retrieval is
        recorded in `provenance` as round 0."""
        raise NotImplementedError

    async def _score(
        self, query: str, hits: list[Hit], timings: Timings
    ) -> tuple[list[float], int]:
        """Scores of a prefix of `hits` (all of them, or a rerank window), and pairs scored."""
        return [h.score for h in hits], 0


def _recorded(hits: list[Hit], retriever: str, provenance: Provenance) -> list[Hit]:
    provenance.add(0, [h.id for h in hits], retriever)
    return hits


class Bm25Method(_FirstStage):
    name = "bm25"

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        return _recorded(await self.context.bm25(query, k, timings), "bm25", provenance), 1


class KnnMethod(_FirstStage):
    name = "knn"

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        vector = await self.context.embed_query(query, timings)
        hits = await self.context.knn(vector, k, timings, returns="text")
        return _recorded(hits, "knn", provenance), 1


class HybridRrfMethod(_FirstStage):
    """Reciprocal-rank fusion of BM25 and kNN, computed here so both engines agree."""

    name = "hybrid-rrf"
    options: FirstStageOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        lexical = _recorded(await self.context.bm25(query, k, timings), "bm25", provenance)
        vector = await self.context.embed_query(query, timings)
        dense = _recorded(await self.context.knn(vector, k, timings, returns="text"), "knn",
                          provenance)
        fused: dict[str, float] = {}
        by_id: dict[str, Hit] = {}
        for ranking in (lexical, dense):
            for rank, hit in enumerate(ranking, start=1):
                fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (self.options.rrf_k + rank)
                by_id.setdefault(hit.id, hit)
        return [replace(by_id[i], score=s, vector=None) for i, s in fused.items()], 2


class HybridLinearMethod(_FirstStage):
    """BM25 and kNN, each `depth` deep, their union ranked by `hybrid_scores`: a
    convex combination of z-scored BM25 and kNN scores, exact for every doc in the union."""

    name = "hybrid-linear"
    options: FirstStageOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        return await linear_hybrid(self.context, query, k, self.options, timings, provenance)

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k, "lexical_weight": self.options.lexical_weight}


async def linear_hybrid(context: SearchContext, query: str, k: int, options: FirstStageOptions,
                        timings: Timings, provenance: Provenance) -> tuple[list[Hit], int]:
    """The union of BM25's and kNN's top `depth`, best first by `hybrid_scores`, then (for
    k past it) their next hits in turn at the union's lowest score, so a deeper page never
    reorders the first; and the engine calls made (`rank_linear` adds up to two)."""
    depth = options.depth
    vector = await context.embed_query(query, timings)
    dense = _recorded(await context.knn(vector, max(k, depth), timings, returns="text"),
                      "knn", provenance)
    lexical = _recorded(await context.bm25(query, max(k, depth), timings), "bm25", provenance)

    async def bm25_of(ids: list[str]) -> list[Hit]:
        return await context.bm25(query, len(ids), timings, ids=ids)

    ranked, calls = await rank_linear(context, vector, dense[:depth], lexical[:depth], bm25_of,
                                      options.lexical_weight, timings)
    fused = {hit.id for hit in ranked}
    floor = ranked[-1].score if ranked else 0.0
    rest = [replace(hit, score=floor)
            for hit in interleave(dense[depth:], lexical[depth:]) if hit.id not in fused]
    return ranked + rest, 2 + calls


async def rank_linear(context: SearchContext, vector: np.ndarray, dense: Sequence[Hit],
                      lexical: Sequence[Hit],
                      bm25_of: Callable[[list[str]], Awaitable[list[Hit]]],
                      lexical_weight: float, timings: Timings) -> tuple[list[Hit], int]:
    """The union of `dense` (`context.knn`'s hits for `vector`) and `lexical`, best first by
    `hybrid_scores`, and the engine calls made: at once, `bm25_of` gives the dense-only
    docs their BM25 (0 where no query term matches) and a kNN call restricted to the
    lexical-only docs their kNN score (exact from a filter this small).

    The dense side is the engine's kNN score, as fusion's: an increasing map of q·c,
    affine (so the z-score makes it q·c's own) for Elasticsearch's dot_product and cosine
    and for OpenSearch's innerproduct where q·c ≥ 0. No stored vector crosses the wire:
    each is ~8 KB of JSON at 384 dimensions.
    """
    union = interleave(dense, lexical)
    bm25 = {hit.id: hit.score for hit in lexical}
    knn = {hit.id: hit.score for hit in dense}
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
    scores = hybrid_scores(np.array([bm25.get(hit.id, 0.0) for hit in union]),
                           np.array([knn.get(hit.id, floor) for hit in union]),
                           lexical_weight)
    order = np.argsort(-scores, kind="stable")
    ranked = [replace(union[i], score=float(scores[i])) for i in order]
    return ranked, int(bool(dense_only)) + int(bool(lexical_only))


class _Rerank(_FirstStage):
    """The labeler over the top-k of what `_retrieve` returns."""

    labelled = True

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
                        ) -> tuple[list[Hit], int]:
        if self.options.first_stage == "bm25":
            return _recorded(await self.context.bm25(query, k, timings), "bm25", provenance), 1
        if self.options.first_stage == "hybrid-linear":
            return await linear_hybrid(self.context, query, k, self.options, timings,
                                       provenance)
        vector = await self.context.embed_query(query, timings)
        hits = await self.context.knn(vector, k, timings, returns="text")
        return _recorded(hits, "knn", provenance), 1

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
                        ) -> tuple[list[Hit], int]:
        vector = await self.context.embed_query(query, timings)
        dense = _recorded(await self.context.knn(vector, k, timings, returns="text"), "knn",
                          provenance)
        lexical = _recorded(await self.context.bm25(query, k, timings), "bm25", provenance)
        return interleave(dense, lexical), 2


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


class VectorRerankMethod(_FirstStage):
    """BM25's top-k reranked by q·c over the stored retriever vectors: no labeler pairs.

    The score is (1−μ)·minmax(BM25) + μ·minmax(q·c) over the k hits, the linear
    interpolation of BERTserini (Yang et al. 2019) with its μ = 0.5.
    """

    name = "vector-rerank"
    options: VectorRerankOptions

    async def _retrieve(self, query: str, k: int, timings: Timings, provenance: Provenance
                        ) -> tuple[list[Hit], int]:
        hits = await self.context.bm25(query, k, timings, with_vectors=True)
        return _recorded(hits, "bm25", provenance), 1

    async def _score(
        self, query: str, hits: list[Hit], timings: Timings
    ) -> tuple[list[float], int]:
        window = hits[: self.options.k]
        if not window:
            return [], 0
        q = await self.context.embed_query(query, timings)
        stored = np.stack([self.context.stored_vector(h) for h in window])
        bm25 = np.array([h.score for h in window])
        return final_scores(stored @ q, bm25, self.options.mu).tolist(), 0

    def _parameters(self) -> dict[str, Any]:
        return {"k": self.options.k, "mu": self.options.mu}


@dataclass(frozen=True)
class RocchioOptions(MethodOptions):
    k: int = 10
    k_prime: int = 3  # top-k' by the labeler are the positives, the rest negatives
    alpha: float = 1.0
    beta: float = 0.75
    gamma: float = 0.15
    lam: float = 0.5
    budget: int | None = None  # labeler pairs per query at most (two rounds of k: 2k)

    def __post_init__(self) -> None:
        check_int("k", self.k, 1, MAX_K)
        if self.budget is not None:
            check_int("budget", self.budget, 1, 2 * MAX_K)
        # positives among the k labelled; past k, every labelled doc is one
        check_int("k_prime", self.k_prime, 1, MAX_K)
        for name in ("alpha", "beta", "gamma"):
            check_number(name, getattr(self, name), 0, 100)
        check_number("lam", self.lam, 0, 1)


@dataclass(frozen=True)
class _Rounds:
    """How a refining search spends its rounds; TourConfig documents each field."""

    k: int
    max_rounds: int
    lam: float
    explore: bool = False
    stop: str = "top1"
    budget: int | None = None


class UpdateRule(Protocol):
    """How TourMethod moves q between rounds; one rule keeps one query's state."""

    name: str
    options: Any
    rounds: _Rounds

    def loss_ids(self, round_ids: list[str], labelled_ids: list[str]) -> list[str]:
        """The docs whose labels the update learns from."""
        ...

    def update(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray: ...

    def converged(self, phi: np.ndarray) -> bool:
        """The paper's early stop on the round's top-k labels, in rank order."""
        ...

    def positives(self, ids: Sequence[str], phi: np.ndarray) -> list[str]: ...


class GradientUpdate:
    """One optimiser step on TOUR's loss (the config's variant: `HardLoss` or `SoftLoss`)
    over the docs the round labelled, as in the paper."""

    def __init__(self, config: TourConfig):
        self.options = config
        self.name = f"tour-{config.variant}"
        self.rounds = _Rounds(config.k, config.max_rounds, config.lam, config.explore,
                              config.stop, config.budget)
        self._optimizer = QueryOptimizer(config)

    def loss_ids(self, round_ids: list[str], labelled_ids: list[str]) -> list[str]:
        return round_ids

    def update(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        return self._optimizer.step(q, C, phi)

    def converged(self, phi: np.ndarray) -> bool:
        return self._optimizer.loss.converged(self._optimizer.loss_labels(phi))

    def positives(self, ids: Sequence[str], phi: np.ndarray) -> list[str]:
        labels = self._optimizer.loss_labels(phi)
        return [ids[i] for i in self._optimizer.loss.positives(labels)]


class DistillationUpdate(GradientUpdate):
    """The same step over every doc labelled so far (`memory="all"`): with the soft loss,
    ReFIT's (Reddy et al. 2023) distillation of the labeler's distribution into q."""

    def loss_ids(self, round_ids: list[str], labelled_ids: list[str]) -> list[str]:
        return labelled_ids


class RocchioUpdate:
    """One Rocchio update (Eq. 6) with the top-k' by φ as the positives, then one more kNN."""

    name = "rocchio"

    def __init__(self, options: RocchioOptions):
        self.options = options
        self.rounds = _Rounds(options.k, max_rounds=1, lam=options.lam, budget=options.budget)

    def loss_ids(self, round_ids: list[str], labelled_ids: list[str]) -> list[str]:
        return round_ids

    def update(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        options = self.options
        by_label = np.argsort(-phi, kind="stable")
        return rocchio(q, C[by_label], min(options.k_prime, len(phi)), options.alpha,
                       options.beta, options.gamma)

    def converged(self, phi: np.ndarray) -> bool:
        return False

    def positives(self, ids: Sequence[str], phi: np.ndarray) -> list[str]:
        return [ids[i] for i in np.argsort(-phi, kind="stable")[: self.options.k_prime]]


def gradient_update(config: TourConfig) -> GradientUpdate:
    """The gradient rule the config's memory names: the round's docs, or all labelled."""
    return DistillationUpdate(config) if config.memory == "all" else GradientUpdate(config)


TOP = 10  # the `top10` stop rule watches this many docs by φ


class TourMethod:
    """TOUR: move the query vector by the labeler's judgement of each round's kNN hits.

    Round 0 retrieves with the encoded query; each later round first updates q by the
    update rule (a TOUR optimiser step or Rocchio), then retrieves again. With `explore`
    a round labels the first k docs of its ranking that no round labelled before. The
    final ranking is every doc labelled, by λ·minmax(φ) + (1−λ)·minmax(q_final·c).
    """

    def __init__(self, context: SearchContext, new_rule: Callable[[], UpdateRule]):
        self.context = context
        self._new_rule = new_rule  # the rule keeps one query's optimiser state
        sample = new_rule()
        self.name, self._parameters = sample.name, _parameters(sample.options)

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started, total = time.perf_counter(), Timings()
        rule = self._new_rule()
        plan = rule.rounds
        q = await self.context.embed_query(query, total)
        vectors: dict[str, np.ndarray] = {}
        sources: dict[str, Any] = {}
        rounds: list[RoundTrace] = []
        labels = LabelCache()
        provenance = Provenance()
        pairs = 0
        for round_no in range(plan.max_rounds + 1):
            timings = Timings()
            round_started = time.perf_counter()
            # exploring, the ranking must reach k docs past every one labelled so far
            depth = min(plan.k + len(labels), MAX_K) if plan.explore else plan.k
            hits = await self.context.knn(q, depth, timings)
            new_docs = provenance.add(round_no, [h.id for h in hits], "knn")
            window = [h for h in hits if h.id not in labels][: plan.k] if plan.explore else hits
            to_label = self._within_budget(window, labels, plan, pairs)
            top_before = labels.top(TOP)
            _, newly = await self.context.label(query, to_label, timings, labels)
            pairs += newly
            for hit in to_label:
                vectors[hit.id] = self.context.stored_vector(hit)
                sources[hit.id] = _without_vector(hit.source, self.context.vector_field)
            top = [h for h in hits[: plan.k] if h.id in labels]
            loss_ids = rule.loss_ids([h.id for h in to_label], list(vectors))
            phi_loss = labels.get(loss_ids)
            ranking = self._rank_seen(vectors, labels, q, sources, size, plan.lam)
            ids = [h.id for h in ranking]
            trace = TourRound(round=round_no, retrieved=len(hits), newly_scored=newly,
                              timings=timings, ranking=ids, new_docs=new_docs,
                              label_mass_at_10=label_mass(ids, _labelled(vectors, labels)),
                              top_ids=[h.id for h in top[:size]],
                              labelled=[h.id for h in to_label])
            stop = (round_no == plan.max_rounds or not to_label
                    or (plan.budget is not None and pairs >= plan.budget)
                    or self._stops_early(plan, rule, round_no, top, labels, top_before))
            if not stop:
                C = np.stack([vectors[i] for i in loss_ids])
                q_next = rule.update(q, C, phi_loss)
                trace.delta_q_norm = float(np.linalg.norm(q_next - q))
                trace.pseudo_positives = rule.positives(loss_ids, phi_loss)
                trace.loss_docs = len(loss_ids)
                q = q_next
            timings.total_ms = (time.perf_counter() - round_started) * 1000
            total.engine_ms += timings.engine_ms
            total.model_ms += timings.model_ms
            rounds.append(trace)
            if stop:
                break
        calls = len(rounds)
        if size > len(ranking):  # deeper than the docs labelled: the engine's order below
            below = await self.context.knn(q, size, total, returns="text")
            calls += 1
            # found with the last round's query, so they show that round (outside its trace)
            provenance.add(rounds[-1].round, [h.id for h in below], "knn")
            ranking += [RankedHit(h.id, h.score, _without_vector(h.source,
                                                                 self.context.vector_field))
                        for h in below if h.id not in labels][: size - len(ranking)]
        phis = _labelled(vectors, labels)
        return _result(self.name, [provenance.stamp(hit, phis) for hit in ranking], rounds,
                       pairs, calls, total, started, dict(self._parameters))

    @staticmethod
    def _within_budget(window: list[Hit], labels: LabelCache, plan: _Rounds,
                       pairs: int) -> list[Hit]:
        """The round's docs to label: `window` less the unlabelled ones past the budget."""
        if plan.budget is None:
            return window
        affordable = {h.id for h in [h for h in window if h.id not in labels]
                      [: max(plan.budget - pairs, 0)]}
        return [h for h in window if h.id in labels or h.id in affordable]

    @staticmethod
    def _stops_early(plan: _Rounds, rule: UpdateRule, round_no: int, top: list[Hit],
               labels: LabelCache, top_before: list[str]) -> bool:
        """Whether the stop rule ends the search after this round."""
        if plan.stop == "top10":  # round 0 adds the whole top-10, so it never stops there
            return round_no > 0 and labels.top(TOP) == top_before
        return bool(top) and rule.converged(labels.get([h.id for h in top]))

    @staticmethod
    def _rank_seen(
        vectors: Mapping[str, np.ndarray],
        labels: LabelCache,
        q: np.ndarray,
        sources: Mapping[str, Any],
        size: int,
        lam: float,
    ) -> list[RankedHit]:
        """What the search returns if it stops now: every labelled doc by the final score."""
        ids = list(vectors)
        if not ids:  # the index had no doc to label
            return []
        sims = np.stack([vectors[i] for i in ids]) @ q
        scores = final_scores(labels.get(ids), sims, lam)
        return _ranked(ids, scores.tolist(), sources, size)


def _labelled(vectors: Mapping[str, np.ndarray], labels: LabelCache) -> dict[str, float]:
    """φ of every doc labelled so far, by id."""
    ids = list(vectors)
    return dict(zip(ids, labels.get(ids).tolist(), strict=True))


def _parameters(config: Any) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config)}


def _without_vector(source: Mapping[str, Any], vector_field: str) -> dict[str, Any]:
    return {key: value for key, value in source.items() if key != vector_field}


def _tour(context: SearchContext, rule: Callable[[Any], UpdateRule], options: Any) -> TourMethod:
    return TourMethod(context, lambda: rule(options))


MethodFactory = Callable[[SearchContext, Mapping[str, Any]], SearchMethod]

# The one registry of method names: the pipeline's own here, the agents' added by
# `register_method` when `es_tour.agents` is imported (the entry points import it).
METHODS: dict[str, MethodFactory] = {
    "bm25": lambda ctx, o: Bm25Method(ctx, FirstStageOptions.from_mapping(o)),
    "knn": lambda ctx, o: KnnMethod(ctx, FirstStageOptions.from_mapping(o)),
    "hybrid-rrf": lambda ctx, o: HybridRrfMethod(ctx, FirstStageOptions.from_mapping(o)),
    "hybrid-linear": lambda ctx, o: HybridLinearMethod(ctx, FirstStageOptions.from_mapping(o)),
    "rerank": lambda ctx, o: RerankMethod(ctx, FirstStageOptions.from_mapping(o)),
    "rerank-hybrid": lambda ctx, o: RerankHybridMethod(ctx, DepthOptions.from_mapping(o)),
    "vector-rerank": lambda ctx, o: VectorRerankMethod(ctx, VectorRerankOptions.from_mapping(o)),
    "rocchio": lambda ctx, o: _tour(ctx, RocchioUpdate, RocchioOptions.from_mapping(o)),
    "tour-hard": lambda ctx, o: _tour(ctx, gradient_update,
                                      TourConfig.from_mapping({**o, "variant": "hard"})),
    "tour-soft": lambda ctx, o: _tour(ctx, gradient_update,
                                      TourConfig.from_mapping({**o, "variant": "soft"})),
}


# The option that caps each labelling method's labeler pairs per query: its budget, the
# axis on which methods are compared (`es-tour eval --budgets`). The methods missing here
# label nothing (bm25, knn, hybrid-rrf, hybrid-linear, vector-rerank); the agents add theirs.
BUDGET_OPTIONS: dict[str, str] = {
    "rerank": "k",  # the window labelled
    "rerank-hybrid": "k",  # k/2 from BM25 and k/2 from kNN
    "rocchio": "budget",
    "tour-hard": "budget",
    "tour-soft": "budget",
}


def register_method(name: str, factory: MethodFactory, budget_option: str | None = None
                    ) -> None:
    """Add a method family built on this package (the agents) to the registry, with the
    option that caps its labeler pairs per query, if it has one."""
    if METHODS.get(name, factory) is not factory:
        raise ValueError(f"method [{name}] is already registered")
    METHODS[name] = factory
    if budget_option is not None:
        BUDGET_OPTIONS[name] = budget_option


def build_method(
    name: str, context: SearchContext, options: Mapping[str, Any] | None = None
) -> SearchMethod:
    """The method called `name`, its options checked now rather than per query.

    Every labelling method also takes `w_bm25` and `w_dense`, the weights of final-score
    fusion (`FusedMethod`); both 0, the default, ranks by its own scores.
    """
    factory = METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown method [{name}]; choose one of: {', '.join(METHODS)}")
    own = dict(options or {})
    weights = FusionWeights(**{key: own.pop(key) for key in ("w_bm25", "w_dense")
                               if key in own})
    method = factory(context, own)
    if not weights.active:
        return method
    if name not in BUDGET_OPTIONS:
        raise ConfigError(f"w_bm25 and w_dense fuse the labeler's scores; [{name}] labels "
                          "nothing")
    return FusedMethod(method, context, weights)
