"""Policies: given the session's state, propose candidates and choose the next Δq (or stop).

Each is one small class behind `decide`. All draw candidates the same way — terms of A_t's
vocabulary, analysed by the index, ranked by the index's IDF, at most `m` per operator —
and differ in which docs feed the pools and how a candidate is scored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from es_tour.agents._environment import Action, Environment, State, TourStep
from es_tour.agents._features import (
    by_idf,
    candidate_features,
    is_word,
    negative_refinements,
    positive_refinements,
    query_terms,
    rm3_weights,
    vocabulary,
)
from es_tour.agents._grammar import Refinement
from es_tour.engines import TermStats
from es_tour.metrics import ndcg_at_k
from es_tour.pipeline._types import Timings

ROUND_SCALE = 5  # rounds at which the `round` feature reaches 1
RM3_MAX_DF_FRACTION = 0.1
_IMPROVED = 1e-9
_TRIALS_AT_ONCE = 4


@dataclass(frozen=True)
class Scored:
    """A candidate Δq (or TOUR's step) and the policy's score for it (RM3 weight, nDCG
    gain, probability)."""

    delta: Action
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"dq": self.delta.render(), "kind": self.delta.kind, "score": round(self.score, 6)}


@dataclass(frozen=True)
class Decision:
    """The candidates a policy weighed and the Δq it chose; `chosen` None means stop."""

    considered: tuple[Scored, ...] = ()
    chosen: Action | None = None


class Policy(Protocol):
    name: str
    # whether its actions may search within Top-K (a `Refinement`); one that never does
    # reads the session's kNN only as deep as the answer shows
    searches_top_k: bool

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision: ...


class NoRefinement:
    """HRE alone: round 0 and stop."""

    name = "hre"
    searches_top_k = False

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision:
        return Decision()


class Rm3Policy:
    """Add, with `+`, the top RM3 expansion term of A_t not already in q_t.

    RM3 over A_t: P(w|R) = Σ_d P(w|d)·P(d|q) with P(d|q) ∝ min-max normalised φ(q0, d).
    Only the ranking of expansion terms matters here, so the interpolation with P(w|q0)
    (which scores only terms already in the query) does not enter. As usual for RM3,
    terms in more than 10% of the index and terms that are not word-like are skipped.
    """

    name = "rm3-agent"
    searches_top_k = True

    def __init__(self, m: int = 5):
        self.m = m

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision:
        stats = await env.term_stats(state.answer, timings)
        used = query_terms(state.query, await env.q0_tokens(timings))
        weights = await asyncio.to_thread(rm3_weights, stats, state.answer, state.answer_phi(),
                                          RM3_MAX_DF_FRACTION)
        ranked = sorted((t for t in weights if t not in used and is_word(t)),
                        key=lambda t: (-weights[t], t))
        considered = tuple(Scored(Refinement(t, "must"), weights[t]) for t in ranked[: self.m])
        return Decision(considered, considered[0].delta if considered else None)


class TourPolicy:
    """TOUR's step (`TourStep`) every round: the dense refinement as an agent in the HRE."""

    name = "tour-agent"
    searches_top_k = False

    def __init__(self, step: TourStep):
        self.step = step

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision:
        return Decision((Scored(self.step, 1.0),), self.step)


class OraclePolicy:
    """Try every candidate in the environment; keep the best nDCG@k gain, stop if none.

    Only a relevant doc not yet seen can raise nDCG (A_t ranks every seen doc by φ), so
    the pools use the judgements this way: `term`, `+` and `^w` draw on terms of A_t that
    an unseen relevant doc also holds; `-` on terms of A_t that no relevant doc holds.
    The oracle stops at once when every relevant doc has been seen. Given `tour_step`, it
    also tries TOUR's action (`TourStep`) each round, beside the Δq candidates.

    Given `pseudo_relevant`, it tries the learned agent's own candidates instead (drawn
    from A_t's best docs by φ, no judgements): the trials then come from the pool that
    agent acts on, and the oracle's gain is the most such a policy could take.
    """

    name = "oracle-agent"
    searches_top_k = True

    def __init__(self, judgements: Mapping[str, int], m: int = 5, k: int = 10,
                 tour_step: TourStep | None = None, pseudo_relevant: int | None = None):
        self.judgements = dict(judgements)
        self.relevant = [doc for doc, rel in self.judgements.items() if rel > 0]
        self.m = m
        self.k = k
        self.tour_step = tour_step
        self.pseudo_relevant = pseudo_relevant

    def candidates(self, state: State, stats: TermStats, used: set[str]) -> list[Action]:
        if self.pseudo_relevant is not None:
            return pseudo_relevance_candidates(state, stats, used, self.m, self.pseudo_relevant)
        unseen = [doc for doc in self.relevant if doc not in state.phi]
        in_answer = vocabulary(stats, state.answer)
        positive = by_idf(in_answer & vocabulary(stats, unseen), stats, used, self.m)
        negative = by_idf(in_answer - vocabulary(stats, self.relevant), stats, used, self.m)
        return [*positive_refinements(positive, self.m), *negative_refinements(negative, self.m)]

    def hopeless(self, state: State) -> bool:
        """No Δq can raise nDCG@k: it is 1 already, or every relevant doc has been seen."""
        return (ndcg_at_k(state.answer, self.judgements, self.k) >= 1.0
                or all(doc in state.phi for doc in self.relevant))

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision:
        if self.hopeless(state):
            return Decision()
        current = ndcg_at_k(state.answer, self.judgements, self.k)
        stats = await env.term_stats([*state.answer, *self.relevant], timings)
        used = query_terms(state.query, await env.q0_tokens(timings))
        candidates = self.candidates(state, stats, used)
        if self.tour_step is not None:
            candidates.append(self.tour_step)
        gate = asyncio.Semaphore(_TRIALS_AT_ONCE)

        async def gain(delta: Action) -> float:
            async with gate:
                trial = await env.step(state, delta, timings)
            return ndcg_at_k(trial.answer, self.judgements, self.k) - current

        gains = await asyncio.gather(*(gain(c) for c in candidates))
        considered = tuple(Scored(c, g) for c, g in zip(candidates, gains, strict=True))
        best = max(considered, key=lambda s: s.score, default=None)
        if best is None or best.score <= _IMPROVED:
            return Decision(considered)
        return Decision(considered, best.delta)


class PolicyModel(Protocol):
    @property
    def threshold(self) -> float: ...

    def predict(self, features: np.ndarray) -> np.ndarray: ...


class LearnedPolicy:
    """Behaviour cloning of the oracle: a model scores (operator, term) candidates.

    Without judgements, the `pseudo_relevant` best docs of A_t by φ stand in for the
    relevant docs when the pools are drawn. Given `tour_step` (a policy trained with it),
    TOUR's step is a candidate too. Stops when no candidate reaches the model's threshold.
    """

    name = "learned-agent"
    searches_top_k = True

    def __init__(self, model: PolicyModel, m: int = 5, pseudo_relevant: int = 3,
                 tour_step: TourStep | None = None):
        self.model = model
        self.m = m
        self.pseudo_relevant = pseudo_relevant
        self.tour_step = tour_step

    def candidates(self, state: State, stats: TermStats, used: set[str]) -> list[Action]:
        return pseudo_relevance_candidates(state, stats, used, self.m, self.pseudo_relevant,
                                           self.tour_step)

    async def decide(self, env: Environment, state: State, timings: Timings) -> Decision:
        stats = await env.term_stats(state.answer, timings)
        q0_tokens = await env.q0_tokens(timings)
        candidates = self.candidates(state, stats, query_terms(state.query, q0_tokens))
        if not candidates:
            return Decision()
        # the trees' inference and the features' Python loops: off the event loop
        scores = await asyncio.to_thread(
            lambda: self.model.predict(features_of(candidates, stats, state, q0_tokens)))
        considered = tuple(Scored(c, float(s)) for c, s in zip(candidates, scores, strict=True))
        best = int(np.argmax(scores))
        if scores[best] < self.model.threshold:
            return Decision(considered)
        return Decision(considered, candidates[best])


def pseudo_relevance_candidates(state: State, stats: TermStats, used: set[str], m: int,
                                pseudo_relevant: int, tour_step: TourStep | None = None
                                ) -> list[Action]:
    """Candidates without judgements: the best docs of A_t by φ stand in for relevant ones;
    TOUR's step too, when given."""
    top = state.answer[:pseudo_relevant]
    in_top = vocabulary(stats, top)
    rest = vocabulary(stats, state.answer[pseudo_relevant:]) - in_top
    return [*positive_refinements(by_idf(in_top, stats, used, m), m),
            *negative_refinements(by_idf(rest, stats, used, m), m),
            *([tour_step] if tour_step is not None else [])]


def features_of(candidates: Sequence[Action], stats: TermStats, state: State,
                q0_tokens: Sequence[str]) -> np.ndarray:
    """The features a learned policy sees for `candidates` in `state`."""
    return candidate_features(candidates, stats, state.answer, state.answer_phi(), q0_tokens,
                              min(state.round / ROUND_SCALE, 1.0))
