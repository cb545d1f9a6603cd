"""The hybrid retrieval environment (HRE) that every agent acts in, on the real engine.

Round 0: BM25 top-k over the whole index, and kNN top-K on q0 — the session's only dense
call, which fixes the sub-collection Top-K. The union of the BM25 top-k and the first k of
Top-K is labelled against q0. Round t > 0: the refined query's `bool` over the whole index
and restricted to Top-K (an ids filter), top-k each; new docs are labelled and joined.
A_t is the best k of every doc seen by φ(q0, d), each doc labelled once per session.
Besides a Δq, a policy may take TOUR's action (`TourStep`): one optimiser step moves the
dense query over every doc labelled so far, and its kNN top-k past them joins what was seen.
With a budget, labelling stops when it is spent (round 0 takes kNN and BM25 docs in
turn) and the docs past it stay unseen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from es_tour.agents._grammar import Query, Refinement, compile_bool, render
from es_tour.engines import Hit, TermStats
from es_tour.pipeline import interleave, knn_candidates
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._types import Timings
from es_tour.tour import MAX_K, LabelCache, QueryOptimizer, TourConfig


@dataclass(frozen=True)
class TourStep:
    """TOUR as a policy action: q_{t+1}'s vector is q_t's after one optimiser step on the
    labels of every doc seen (the step's own settings: TourConfig's variant, lr, scale,
    tau, p, standardize, weight_decay); the Lucene query stays. The soft loss by default,
    chosen on SciFact train (docs/agents.md: tour-agent 0.7527 soft, 0.7523 hard)."""

    step: TourConfig = field(default_factory=lambda: TourConfig(variant="soft"))
    kind: str = "tour"

    def render(self) -> str:
        return "tour-step"


Action = Refinement | TourStep


@dataclass(frozen=True)
class State:
    """One point of a session: q_t, every doc seen with its φ, and A_t (best first)."""

    round: int
    query: Query
    phi: dict[str, float]  # doc id -> φ(q0, d), in first-seen order
    answer: tuple[str, ...]
    retrieved: int = 0  # hits the round's engine calls returned
    # the docs this round's retrievals returned for labelling, per retriever (bm25, knn)
    returned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    vector: np.ndarray | None = field(default=None, compare=False)  # q_t's dense vector

    def answer_phi(self) -> list[float]:
        return [self.phi[doc] for doc in self.answer]


@dataclass
class Budget:
    """What a session cost: engine calls (searches and term vectors: one term_stats or
    analysed query is one call, however many docs it reads) and labels,
    and the labels it may spend (`pairs`, None for no cap)."""

    engine_calls: int = 0
    pairs_scored: int = 0
    timings: Timings = field(default_factory=Timings)
    pairs: int | None = None

    @property
    def left(self) -> int | None:
        return None if self.pairs is None else max(self.pairs - self.pairs_scored, 0)

    @property
    def spent(self) -> bool:
        return self.left == 0


class Environment:
    """One session of the HRE for one query; `step` never changes a `State` it is given."""

    def __init__(self, context: SearchContext, k: int = 10, top_k: int = 1000,
                 budget: int | None = None, query: str = ""):
        self.context = context
        self.k = k
        self.top_k = top_k
        self.budget = Budget(pairs=budget)
        self.sources: dict[str, dict[str, Any]] = {}
        self._labels = LabelCache()
        self._q0 = query  # `start` sets it; a session that never starts passes it here
        self._q0_tokens: list[str] | None = None
        self._sub_collection: list[str] = []
        self._dense_scores: dict[str, float] = {}
        self._vectors: dict[str, np.ndarray] = {}  # stored vectors of labelled docs, as read
        self._retrieved: dict[str, tuple[list[Hit], list[Hit]]] = {}
        self._read: dict[str, Hit] = {}  # the docs read to label them, by id
        self._stats = TermStats({}, {}, 0)
        self._lock = asyncio.Lock()
        # trials run at once (the oracle's) share the budget: each takes its share in turn
        self._labelling = asyncio.Lock()

    async def start(self, query: str, timings: Timings) -> State:
        """Round 0 on q0."""
        self._q0 = query
        context = self.context
        vector = await context.embed_query(query, timings)
        # doc keys and scores only, no stored field read (1000 hits' `_id`s were most of a
        # SciFact search's engine time), the BM25 leg counting the request's total
        lexical, dense = await self._engine(
            timings, context.lexical_search(query, self.k, keyed=True),
            context.engine.knn(context.index, vector, self.top_k,
                               num_candidates=knn_candidates(self.top_k),
                               field=context.vector_field, returns="keys"))
        self._sub_collection = [hit.id for hit in dense]
        self._dense_scores = {hit.id: hit.score for hit in dense}
        # in turn, so a budget below 2k labels an equal share of each; only the docs
        # labelled are read, in one fetch, as this caller sees them, with the stored
        # vectors a TOUR step takes (`with_text`: the doc cache's, and the page's)
        to_label = interleave(dense[: self.k], lexical)
        if self.budget.left is not None:
            to_label = to_label[: self.budget.left]
        self.budget.engine_calls += bool(to_label)
        known = context.engine.known_id
        read = [replace(hit, id=known(hit.id))
                for hit in await context.with_text(to_label, timings, vectors=True)]
        self._read = {hit.id: hit for hit in read}
        phi = await self._join({}, read, timings)
        returned = {"bm25": _ids(lexical, known), "knn": _ids(dense[: self.k], known)}
        return State(0, Query(query), phi, self._best(phi), len(lexical) + len(dense), returned,
                     vector)

    def unlabelled_rest(self, state: State) -> list[tuple[str, float]]:
        """Top-K docs the session never labelled, in kNN order with the engine's scores
        (by doc key where no search has named its `_id`)."""
        known = self.context.engine.known_id
        return [(known(doc), self._dense_scores[doc]) for doc in self._sub_collection
                if known(doc) not in state.phi]

    async def step(self, state: State, action: Action, timings: Timings) -> State:
        """q_{t+1} = q_t Δq: its top-k over the index and over Top-K, joined to what was
        seen; or, for a TourStep, the moved vector's kNN top-k past every doc seen."""
        if isinstance(action, TourStep):
            return await self._tour_step(state, action, timings)
        query = state.query.refine(action)
        whole, within = await self._search(query, timings)
        for hit in (*whole, *within):  # whole sources, vectors too
            self._read.setdefault(hit.id, hit)
        phi = await self._join(state.phi, [*whole, *within], timings)
        return State(state.round + 1, query, phi, self._best(phi), len(whole) + len(within),
                     {"bm25": _ids([*whole, *within])}, state.vector)

    async def _tour_step(self, state: State, action: TourStep, timings: Timings) -> State:
        if state.vector is None:
            raise ValueError("a TourStep needs the state's query vector (Environment.start)")
        self._remember_vectors([self._read[doc] for doc in state.phi
                                if doc in self._read and doc not in self._vectors],
                               required=False)
        missing = [doc for doc in state.phi if doc not in self._vectors]
        if missing:  # labelled from a search that read no vector: read the stored vectors
            (docs,) = await self._engine(timings, self.context.engine.docs_by_id(
                self.context.index, missing))
            self._remember_vectors(docs)
        ids = [doc for doc in state.phi if doc in self._vectors]  # not deleted meanwhile
        if not ids:  # nothing labelled to learn from (an empty index): the step stays put
            return replace(state, round=state.round + 1, retrieved=0, returned={})
        # a fresh optimiser: a trial step leaves no momentum behind for the next one
        vector = QueryOptimizer(action.step).step(
            state.vector, self.stored_vectors(ids),
            np.array([state.phi[doc] for doc in ids]))
        # k past those seen, as deep as the engines go, by doc key: only the docs it will
        # label are read, with the vectors later steps take (a 28-doc kNN's whole sources
        # were most of a SciFact search's bytes from the engine)
        hits = await self.context.knn(vector, min(self.k + len(ids), MAX_K), timings,
                                      returns="keys")
        known = self.context.engine.known_id
        fresh = [hit for hit in hits if known(hit.id) not in state.phi][: self.k]
        if self.budget.left is not None:  # past the budget a doc stays unseen: none read
            fresh = fresh[: self.budget.left]
        self.budget.engine_calls += 1 + bool(fresh)
        fresh = [replace(hit, id=known(hit.id))
                 for hit in await self.context.with_text(fresh, timings, vectors=True)]
        self._remember_vectors(fresh)
        phi = await self._join(state.phi, fresh, timings)
        return State(state.round + 1, state.query, phi, self._best(phi), len(hits),
                     {"knn": _ids(fresh)}, vector)

    def stored_vectors(self, ids: Sequence[str]) -> np.ndarray:
        """(len(ids), d) stored retriever vectors of docs a TOUR step has read: every doc
        seen before it, and the docs its kNN call brought."""
        return np.stack([self._vectors[doc] for doc in ids]) if ids else np.zeros((0, 0))

    def _remember_vectors(self, hits: Sequence[Hit], required: bool = True) -> None:
        self._vectors = self.context.stored_vectors_of(hits, required=required) | self._vectors

    async def term_stats(self, ids: Sequence[str], timings: Timings) -> TermStats:
        """Term vectors of `ids` with index statistics; each doc is fetched once a session."""
        async with self._lock:
            missing = [doc for doc in dict.fromkeys(ids) if doc not in self._stats.tf]
            if missing:
                (fresh,) = await self._engine(timings, self.context.engine.term_stats(
                    self.context.index, missing, fields=self.context.text_fields))
                self._stats = TermStats({**self._stats.tf, **fresh.tf},
                                        {**self._stats.df, **fresh.df},
                                        max(self._stats.doc_count, fresh.doc_count))
            return self._stats

    async def q0_tokens(self, timings: Timings) -> list[str]:
        """q0 as the index analyses its last text field (the body, `text` by default)."""
        if self._q0_tokens is None:
            field = self.context.text_fields[-1]
            (self._q0_tokens,) = await self._engine(timings, self.context.engine.analyzed_tokens(
                self.context.index, self._q0, field=field))
        return self._q0_tokens

    def describe(self, query: Query) -> dict[str, Any]:
        """The query as the trace shows it: Lucene text and the compiled `bool`."""
        return {"lucene": render(query), "bool": self._compiled(query)}

    async def _search(self, query: Query, timings: Timings) -> tuple[list[Hit], list[Hit]]:
        key = render(query)
        if key not in self._retrieved:
            compiled = self._compiled(query)
            engine, index = self.context.engine, self.context.index
            whole, within = await self._engine(
                timings, engine.bool_search(index, compiled, self.k),
                engine.bool_search(index, compiled, self.k, ids=self._sub_collection),
            )
            # a hit within Top-K comes named by its doc key, and brings its `_id`
            self._retrieved[key] = (whole, [replace(hit, id=engine.known_id(hit.id))
                                            for hit in within])
        return self._retrieved[key]

    def _compiled(self, query: Query) -> dict[str, Any]:
        """q_t as the engine's `bool`, around the request's own query when it has one."""
        return compile_bool(query, self.context.text_fields, self.context.lexical_query)

    async def _engine(self, timings: Timings, *calls: Any) -> list[Any]:
        """Run engine calls concurrently, counting each and timing them together."""
        self.budget.engine_calls += len(calls)
        with timings.engine():
            return list(await asyncio.gather(*calls))

    async def _join(self, seen: dict[str, float], hits: Sequence[Hit],
                    timings: Timings) -> dict[str, float]:
        phi = dict(seen)
        async with self._labelling:
            fresh = list({hit.id: hit for hit in hits if hit.id not in seen}.values())
            if self.budget.left is not None:  # past the budget a doc stays unseen
                fresh = fresh[: self.budget.left]
            for hit in fresh:
                self.sources.setdefault(hit.id, {key: value for key, value in hit.source.items()
                                                 if key != self.context.vector_field})
            if fresh:
                scores, newly = await self.context.label(self._q0, fresh, timings, self._labels)
                self.budget.pairs_scored += newly
                phi.update(zip([hit.id for hit in fresh], scores.tolist(), strict=True))
        return phi

    def _best(self, phi: dict[str, float]) -> tuple[str, ...]:
        ids, values = list(phi), list(phi.values())
        ranked = sorted(range(len(ids)), key=lambda i: -values[i])  # stable: first seen wins ties
        return tuple(ids[i] for i in ranked[: self.k])


def _ids(hits: Sequence[Hit], known: Callable[[str], str] = str) -> tuple[str, ...]:
    """The hits' ids, each renamed by `known` (the engine view's: a doc key a fetch of the
    session has met, by its `_id`)."""
    return tuple(known(hit.id) for hit in hits)
