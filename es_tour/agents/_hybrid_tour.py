"""hybrid-tour: TOUR and an agent in one BM25 ∪ kNN session, both learning from one set of
labels.

Each round labels up to k docs no earlier round labelled from the pool of two rankings,
kNN with the query vector q_t and BM25 with the Lucene query q_t: taken in turn
(`pool=interleave`), or their union ranked as hybrid-linear ranks it
(`pool=hybrid-linear`: z-scored BM25 beside z-scored q_t·c). Then the labels
move both: TOUR's optimiser step moves the vector over every doc labelled so far (their
stored vectors), and the RM3 policy adds its Δq to the Lucene query. The answer is every
labelled doc by φ. It joins TOUR (Sung et al. 2023) with the hybrid agents (HARE).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from es_tour.agents._environment import Environment, State
from es_tour.agents._grammar import Query, Refinement, compile_bool
from es_tour.agents._methods import MAX_AGENT_K, AgentRound
from es_tour.agents._policies import NoRefinement, Policy, Rm3Policy
from es_tour.engines import Hit
from es_tour.errors import ConfigError
from es_tour.options import check_int, check_number
from es_tour.pipeline import (
    LEXICAL_WEIGHT,
    LINEAR_DEPTH,
    MethodOptions,
    Provenance,
    RankedHit,
    SearchContext,
    SearchMethod,
    SearchResult,
    Timings,
    interleave,
    label_mass,
    rank_linear,
    register_method,
)
from es_tour.tour import MAX_ROUNDS, LabelCache, QueryOptimizer, TourConfig

# TourConfig's fields that shape the step; rounds, budget and stop are the session's own
LEXICAL_POLICIES = ("rm3", "none")
POOLS = ("interleave", "hybrid-linear")  # how a round orders BM25 ∪ kNN to pick docs to label
STEP_OPTIONS = ("variant", "lr", "scale", "tau", "p", "standardize", "momentum",
                "weight_decay")


@dataclass(frozen=True)
class HybridTourOptions(MethodOptions):
    k: int = 10  # new docs labelled per round, taken from kNN and BM25 in turn
    budget: int = 20  # labeler pairs per query
    max_rounds: int = 3
    m: int = 5  # RM3 candidate terms per round
    lexical: str = "rm3"  # the Lucene query's Δq: the RM3 policy's, or "none" (q0 throughout)
    pool: str = "interleave"  # one of POOLS
    lexical_weight: float = LEXICAL_WEIGHT  # pool=hybrid-linear: the weight of z(BM25)

    def __post_init__(self) -> None:
        if self.lexical not in LEXICAL_POLICIES:
            raise ConfigError(f"lexical must be one of {list(LEXICAL_POLICIES)}, "
                              f"got {self.lexical!r}")
        if self.pool not in POOLS:
            raise ConfigError(f"pool must be one of {list(POOLS)}, got {self.pool!r}")
        check_number("lexical_weight", self.lexical_weight, 0, 1)
        check_int("k", self.k, 1, MAX_AGENT_K)
        check_int("budget", self.budget, 1, MAX_AGENT_K * (MAX_ROUNDS + 1))
        check_int("max_rounds", self.max_rounds, 0, MAX_ROUNDS)
        check_int("m", self.m, 1, 100)


@dataclass(kw_only=True)
class HybridTourRound(AgentRound):
    """An agent round that also moved the query vector."""

    labelled: list[str]  # docs sent to the labeler this round
    delta_q_norm: float | None = None  # ‖q_{t+1} − q_t‖; None when the session stopped


@dataclass
class _Session:
    """What one query's session has labelled: the docs' sources, and the stored vectors
    of those a TOUR step has read; and what the engine answered for each Lucene query it
    ran (a round that moves only the vector asks none again)."""

    labels: LabelCache
    sources: dict[str, dict[str, Any]]
    vectors: dict[str, np.ndarray]
    # Lucene query -> (depth asked, its top hits), and the BM25 of every doc scored for it
    top: dict[Query, tuple[int, list[Hit]]] = field(default_factory=dict)
    bm25: dict[Query, dict[str, float]] = field(default_factory=dict)

    def phi(self) -> dict[str, float]:
        ids = list(self.sources)
        return dict(zip(ids, self.labels.get(ids).tolist(), strict=True))


class HybridTourMethod:
    name = "hybrid-tour"

    def __init__(self, context: SearchContext, options: HybridTourOptions, step: TourConfig):
        self.context = context
        self.options = options
        self.step = step

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started, total = time.perf_counter(), Timings()
        context, options = self.context, self.options
        env = Environment(context, options.k, options.k, query=query)
        policy: Policy = Rm3Policy(options.m) if options.lexical == "rm3" else NoRefinement()
        optimizer = QueryOptimizer(self.step)
        q, lexical = await context.embed_query(query, total), Query(query)
        seen = _Session(LabelCache(), {}, {})
        provenance, rounds = Provenance(), list[HybridTourRound]()
        pairs = calls = 0
        first: list[Hit] = []  # round 0's two rankings in turn, `size` deep: the fill below
        for round_no in range(options.max_rounds + 1):
            timings, round_started = Timings(), time.perf_counter()
            calls_before = env.budget.engine_calls
            # k docs past every one labelled; round 0 also reaches `size`, for the fill
            depth = options.k + len(seen.sources) if rounds else max(options.k, size)
            if options.pool == "hybrid-linear":
                depth = max(depth, LINEAR_DEPTH)  # the z-scores need hybrid-linear's union
            scored = (await self._scored_legs(q, lexical, depth, seen, timings)
                      if options.pool == "hybrid-linear" else None)
            dense, (sparse, asked) = scored or await asyncio.gather(
                context.knn(q, depth, timings, returns="keys"),
                self._top(lexical, depth, seen, timings))
            calls += 1 + asked
            new_docs = (provenance.add(round_no, [h.id for h in dense], "knn")
                        + provenance.add(round_no, [h.id for h in sparse], "bm25"))
            pool, extra_calls = await self._pool(q, lexical, dense, sparse, seen, timings)
            calls += extra_calls
            first = first or pool
            to_label = [h for h in pool if h.id not in seen.sources][
                : min(options.k, options.budget - pairs)]
            last = (round_no == options.max_rounds or not to_label
                    or pairs + len(to_label) >= options.budget)
            page = None  # the answer's labelled docs, fetched as the caller's page
            if last and context.page_ahead is not None:
                page = context.page_ahead([*seen.sources, *(hit.id for hit in to_label)])
            # the text to label, and the stored vectors the step after reads, in one call; a
            # last round's text from the page, where it holds the docs' whole sources
            to_label = await context.with_text(to_label, timings, vectors=not last, page=page)
            seen.vectors |= {h.id: h.vector for h in to_label if h.vector is not None}
            _, newly = await context.label(query, to_label, timings, seen.labels)
            pairs += newly
            for hit in to_label:
                seen.sources[hit.id] = self._source(hit)
            phi = seen.phi()
            answer = tuple(sorted(phi, key=lambda doc: -phi[doc])[: options.k])
            previous = tuple(rounds[-1].ranking) if rounds else ()
            trace = HybridTourRound(
                round=round_no, retrieved=len(dense) + len(sparse), newly_scored=newly,
                timings=timings, ranking=list(answer), new_docs=new_docs,
                label_mass_at_10=label_mass(answer, phi), query=env.describe(lexical),
                answer_change={"entered": [d for d in answer if d not in previous],
                               "left": [d for d in previous if d not in answer]},
                candidates=[], chosen=None, engine_calls=1 + asked + extra_calls,
                labelled=[h.id for h in to_label])
            rounds.append(trace)
            if not last:
                # the same labels move both halves: the vector by TOUR's step, the text by Δq
                unread = [i for i in seen.sources if i not in seen.vectors]
                if unread:  # a doc whose vector the engine reads from nowhere else
                    seen.vectors |= await context.stored_vectors(unread, timings)
                    calls += 1
                    trace.engine_calls += 1
                # a doc deleted since it was labelled has no vector to read
                ids = [i for i in seen.sources if i in seen.vectors]
                q_next = optimizer.step(q, np.stack([seen.vectors[i] for i in ids]),
                                        seen.labels.get(ids))
                trace.delta_q_norm = float(np.linalg.norm(q_next - q))
                q = q_next
                decision = await policy.decide(env, State(round_no, lexical, phi, answer),
                                               timings)
                trace.candidates = [scored.to_dict() for scored in decision.considered]
                if decision.chosen is not None:
                    # RM3 rewrites the BM25 query only: TOUR's step is the vector's, above
                    assert isinstance(decision.chosen, Refinement)
                    trace.chosen = decision.chosen.render()
                    lexical = lexical.refine(decision.chosen)
            trace.engine_calls += env.budget.engine_calls - calls_before
            timings.total_ms = (time.perf_counter() - round_started) * 1000
            total.engine_ms += timings.engine_ms
            total.model_ms += timings.model_ms
            if last:
                break
        phi = seen.phi()
        hits = [RankedHit(doc, phi[doc], seen.sources[doc])
                for doc in sorted(phi, key=lambda doc: -phi[doc])]
        # below the labelled docs, round 0's pool, as rerank-hybrid or hybrid-linear fill
        # them: a moved vector and a `+term` find new docs to label but recall less (measured)
        hits += [RankedHit(h.id, h.score, self._source(h)) for h in first if h.id not in phi]
        total.total_ms = (time.perf_counter() - started) * 1000
        parameters = {"k": options.k, "budget": options.budget,
                      "max_rounds": options.max_rounds, "m": options.m,
                      "lexical": options.lexical, "pool": options.pool,
                      **({"lexical_weight": options.lexical_weight}
                         if options.pool == "hybrid-linear" else {}),
                      **{key: getattr(self.step, key) for key in STEP_OPTIONS}}
        return SearchResult(self.name, [provenance.stamp(hit, phi) for hit in hits[:size]],
                            list(rounds), pairs, calls + env.budget.engine_calls, total,
                            parameters,
                            lexical_scores=dict(seen.bm25.get(Query(query), {})))

    async def _scored_legs(self, q: np.ndarray, lexical: Query, depth: int, seen: _Session,
                           timings: Timings) -> tuple[list[Hit], tuple[list[Hit], int]] | None:
        """kNN's and the Lucene query's top `depth`, each hit with the other's score where
        the engine brings it, in one round trip (`SearchContext.hybrid_legs`), as `_top`'s
        answer is; None where the engine cannot. The Lucene query's hits' q·c moved with
        q: each round asks it again, or for its top known from an earlier round, their
        q·c alone."""
        compiled = compile_bool(lexical, self.context.text_fields, self.context.lexical_query)
        asked, known = seen.top.get(lexical, (0, []))
        legs = await self.context.hybrid_legs(q, compiled, depth, timings,
                                              known[:depth] if asked >= depth else None)
        if legs is None:
            return None
        sparse, dense = legs
        if asked < depth:
            seen.top[lexical] = (depth, sparse)
        seen.bm25.setdefault(lexical, {}).update(
            [(hit.id, hit.score) for hit in sparse]
            + [(hit.id, hit.other_score) for hit in dense if hit.other_score is not None])
        return dense, (sparse, 1)

    async def _top(self, lexical: Query, depth: int, seen: _Session, timings: Timings
                   ) -> tuple[list[Hit], int]:
        """The Lucene query's top `depth`, and the engine calls that took: none where an
        earlier round already ran that query as deep."""
        asked, known = seen.top.get(lexical, (0, []))
        if asked >= depth:
            return known[:depth], 0
        hits = await self._bm25(lexical, depth, timings)
        seen.top[lexical] = (depth, hits)
        seen.bm25.setdefault(lexical, {}).update((hit.id, hit.score) for hit in hits)
        return hits, 1

    async def _pool(self, q: np.ndarray, lexical: Query, dense: list[Hit], sparse: list[Hit],
                    seen: _Session, timings: Timings) -> tuple[list[Hit], int]:
        """This round's candidates best first, and the engine calls that ordering made."""
        if self.options.pool == "interleave":
            return interleave(dense, sparse), 0
        scored = seen.bm25.setdefault(lexical, {})

        async def bm25_of(ids: list[str]) -> list[Hit]:
            # BM25 of each doc once a query: 0 for one that matches no term of it
            unknown = [i for i in ids if i not in scored]
            if unknown:
                found = await self._bm25(lexical, len(unknown), timings, ids=unknown)
                scored.update(dict.fromkeys(unknown, 0.0))
                scored.update((hit.id, hit.score) for hit in found)
            return [Hit(i, scored[i]) for i in ids if scored[i] > 0]

        return await rank_linear(self.context, q, dense, sparse, bm25_of,
                                 self.options.lexical_weight, timings)

    async def _bm25(self, query: Query, k: int, timings: Timings,
                    ids: list[str] | None = None) -> list[Hit]:
        """The Lucene query q_t's top k (among `ids`, if given): doc keys and scores."""
        compiled = compile_bool(query, self.context.text_fields, self.context.lexical_query)
        with timings.engine():
            return await self.context.engine.bool_search(self.context.index, compiled, k,
                                                         ids=ids, keyed=True)

    def _source(self, hit: Hit) -> dict[str, Any]:
        return {key: value for key, value in hit.source.items()
                if key != self.context.vector_field}


def hybrid_tour(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """TOUR's vector step and the RM3 agent's Δq in one BM25 ∪ kNN session. Options: k,
    budget, max_rounds, m, lexical, pool, lexical_weight, and TOUR's step options
    (STEP_OPTIONS)."""
    own = HybridTourOptions.from_mapping({key: value for key, value in options.items()
                                          if key not in STEP_OPTIONS})
    # one step a round: the optimiser's rounds (and its lr decay) are the session's
    step = TourConfig.from_mapping({**{key: value for key, value in options.items()
                                       if key in STEP_OPTIONS},
                                    "max_rounds": max(own.max_rounds, 1)})
    return HybridTourMethod(context, own, step)


register_method("hybrid-tour", hybrid_tour, budget_option="budget")
