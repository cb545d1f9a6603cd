"""The refining loops: TOUR (hard, soft, distillation) and Rocchio, one `TourMethod`
behind an `UpdateRule` that moves the query vector between kNN rounds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol

import numpy as np

from es_tour.engines import Hit
from es_tour.options import check_int, check_number
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._first_stage import _ranked, _result, _without_vector
from es_tour.pipeline._types import (
    MethodOptions,
    Provenance,
    RankedHit,
    RoundTrace,
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
    rocchio,
)


@dataclass(frozen=True)
class RocchioOptions(MethodOptions):
    USER_NAMES: ClassVar[dict[str, str]] = {"lambda": "lam"}  # the index setting's name

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
        # fusion weighs BM25 (`FusedMethod` sets it): a last round known as one before it
        # labels asks its labelled docs' BM25 in its text fetch's round trip
        self.scores_lexical = False

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
        pairs = calls = 0
        for round_no in range(plan.max_rounds + 1):
            timings = Timings()
            round_started = time.perf_counter()
            # exploring, the ranking must reach k docs past every one labelled so far
            depth = min(plan.k + len(labels), MAX_K) if plan.explore else plan.k
            hits = await self.context.knn(q, depth, timings, returns="keys")
            new_docs = provenance.add(round_no, [h.id for h in hits], "knn")
            window = [h for h in hits if h.id not in labels][: plan.k] if plan.explore else hits
            to_label = self._within_budget(window, labels, plan, pairs)
            # the text and stored vectors of the docs no earlier round read, in one call
            unread = [h for h in to_label if h.id not in vectors]
            last = (round_no == plan.max_rounds or not to_label or (
                plan.budget is not None
                and pairs + sum(h.id not in labels for h in to_label) >= plan.budget))
            fetched, lexical, below, asked = await self._fetch(
                query, q, vectors, unread, timings, size if last else None)
            read = {h.id: h for h in fetched}
            calls += 1 + bool(unread) + asked
            # before labelling: a caller who can read no vector has its answer without it
            vectors |= self.context.stored_vectors_of(list(read.values()))
            # a doc deleted since the kNN met it is neither labelled nor stepped on
            to_label = [read.get(h.id, h) for h in to_label if h.id in vectors]
            top_before = labels.top(TOP)
            _, newly = await self.context.label(query, to_label, timings, labels)
            pairs += newly
            for hit in read.values():
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
        if size > len(ranking):  # deeper than the docs labelled: the engine's order below
            if below is None:  # a round that stopped early, not known as the last one
                below = await self.context.knn(q, size, total, returns="keys")
                calls += 1
            # found with the last round's query, so they show that round (outside its trace)
            provenance.add(rounds[-1].round, [h.id for h in below], "knn")
            ranking += [RankedHit(h.id, h.score, _without_vector(h.source,
                                                                 self.context.vector_field))
                        for h in below if h.id not in labels][: size - len(ranking)]
        phis = _labelled(vectors, labels)
        return _result(self.name, [provenance.stamp(hit, phis) for hit in ranking], rounds,
                       pairs, calls, total, started, dict(self._parameters), lexical)

    async def _fetch(self, query: str, q: np.ndarray, read: Mapping[str, np.ndarray],
                     unread: list[Hit], timings: Timings, last_size: int | None
                     ) -> tuple[list[Hit], dict[str, float], list[Hit] | None, int]:
        """`unread` with their text and stored vectors; a last round (`last_size`: the size
        asked) also asks, in the same round trip: the sidecar's page of every doc labelled
        (`page_ahead`: the answer ranks them first), their BM25 where fusion weighs it, and
        where they are fewer than the size, the kNN order below them (its q is final now).
        Then the BM25 by id, the kNN hits below, and the searches these asked."""
        fetch = self.context.with_text(unread, timings, vectors=True)
        if last_size is None:
            return await fetch, {}, None, 0
        labelled = [*read, *(hit.id for hit in unread)]
        if self.context.page_ahead is not None:
            self.context.page_ahead(labelled)
        wanted: list[Awaitable[list[Hit]]] = [fetch]
        if self.scores_lexical:
            wanted.append(self.context.bm25(query, len(labelled), timings, ids=labelled))
        if last_size > len(labelled):
            wanted.append(self.context.knn(q, last_size, timings, returns="keys"))
        hits, *asked = await asyncio.gather(*wanted)
        lexical = {}
        if self.scores_lexical:  # a doc with no BM25 hit matches no query term: 0
            lexical = dict.fromkeys(labelled, 0.0) | {hit.id: hit.score for hit in asked[0]}
        below = asked[-1] if last_size > len(labelled) else None
        return hits, lexical, below, len(asked)

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


def _tour(context: SearchContext, rule: Callable[[Any], UpdateRule], options: Any) -> TourMethod:
    return TourMethod(context, lambda: rule(options))
