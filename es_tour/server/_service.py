"""One intercepted search, in five steps: the request read (`_request.SearchRequest`), its
plan (`_plan.Planner`: the method, models and context it runs with), its rounds
(`_rounds.Rounds`: admission and the ranking under a deadline, while the engine counts
the request as sent, the overview), the engine's fetch of the page (`_fetch`), and the
answer rendered in the engine's shape (`_render`).

Refinements run on an event loop of their own (`RefineLoop`), apart from the loop that
serves pass-through traffic, and model inference on the pipeline's ModelPool.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from es_tour.engines import ClientEngine, Overview, connect
from es_tour.errors import VectorUnreadableError
from es_tour.pipeline import DocCache, ModelPool, Timings, VectorStore, with_doc_ids
from es_tour.server._config import ServerConfig
from es_tour.server._fetch import (
    ENGINE_PAGE,
    PageAhead,
    counted_by_a_leg,
    fetch_page,
    leg_answer,
    overview_alongside,
    overview_body,
    plan_page,
)
from es_tour.server._loop import RefineLoop
from es_tour.server._models import Models
from es_tour.server._plan import Planner, RefinePlan
from es_tour.server._rankings import RankingCache, ranking_key, window_fetched
from es_tour.server._render import as_the_engine_ranks, render
from es_tour.server._request import SearchRequest
from es_tour.server._rounds import Ranked, Rounds, settle
from es_tour.server._stats import MULTIPROC_ENV, Stats
from es_tour.server._upstream import caller_fingerprint

log = logging.getLogger("es_tour.server")
T = TypeVar("T")
# why an answer is the engine's own: the method reads stored vectors the caller cannot
VECTORS_UNREADABLE = "vectors unreadable"
TRACED_TOP = 10  # each round's top docs named by `_id` in the trace (its nDCG@10's)


def shared_rankings_dir(config: ServerConfig) -> Path | None:
    """Where the workers of `es-tour serve --workers N` share the rankings they keep: in
    the run's own directory (`_workers`); None for a sidecar of one process."""
    run = os.environ.get(MULTIPROC_ENV)
    return Path(run) / "rankings" if config.workers > 1 and run else None


class TourService:
    """Shared state of the intercepting side: config, models, the model pool, the admission
    slots, and one engine adapter whose connection pool every request shares, each with its
    caller's credentials."""

    def __init__(self, config: ServerConfig, models: Models):
        self.config = config
        self.models = models
        self.pool = ModelPool(config.model_threads)
        self._loop = RefineLoop()  # everything below lives on it
        self._engine: ClientEngine | None = None
        self.store: VectorStore | None = None  # made with the engine adapter
        self.doc_cache = (DocCache(config.doc_cache_mib << 20, config.doc_cache_ttl_s,
                                   preload_docs=config.doc_cache_preload_docs)
                          if config.doc_cache_mib else None)
        self._writer: asyncio.Task[None] | None = None
        self.stats = Stats(models.loaded, lambda: self.store, lambda: self.doc_cache,
                           lambda: self.rankings)
        self._planner = Planner(config, models, self.pool)
        self._rounds = Rounds(config, self.stats)
        self.rankings = (RankingCache(config.ranking_cache_ttl_s,
                                      shared_dir=shared_rankings_dir(config))
                         if config.ranking_cache_ttl_s else None)

    def engine(self, kind: str) -> ClientEngine:
        if self._engine is None:
            self._engine = connect(kind, self.config.upstreams, self.config.upstream_tls)
            if self.config.vector_store:
                self.store = VectorStore(self._engine.with_headers(self.config.service_identity),
                                         preload_docs=self.config.store_preload_docs)
                self._writer = asyncio.get_running_loop().create_task(self.store.run_writer())
        return self._engine

    async def close(self) -> None:
        self.pool.close()
        await self._loop.close(self._close())

    async def _close(self) -> None:
        if self.rankings is not None:
            self.rankings.close()
        if self.doc_cache is not None:
            await self.doc_cache.close()
        if self.store is not None:
            await self.store.close()
        if self._writer is not None:  # it writes what is queued as it ends
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        if self._engine is not None:
            await self._engine.close()

    def defaults(self) -> dict[str, Any]:
        return self.config.defaults()

    async def search(self, request: SearchRequest, flat_settings: dict[str, Any] | None,
                     engine: str, caller: Mapping[str, str]) -> dict[str, Any]:
        """The engine-shaped response to `request`, TOUR's trace under ext.tour; every engine
        call carries the `caller`'s identity headers, and an engine error comes back as is.
        It runs on the refinement loop: the caller's loop only waits for it."""
        return await self._loop.run(self._search(request, flat_settings, engine, caller))

    async def _search(self, request: SearchRequest, flat_settings: dict[str, Any] | None,
                      engine: str, caller: Mapping[str, str]) -> dict[str, Any]:
        """The request's plan, then its refinement; the engine's own answer where its method
        reads stored vectors that this caller cannot read."""
        started = time.perf_counter()
        as_caller = self.engine(engine).with_headers(caller)
        uuid = (flat_settings or {}).get("index.uuid")
        fingerprint = caller_fingerprint(caller)
        fetched_docs = (self.doc_cache.view(fingerprint, uuid)
                        if self.doc_cache is not None and uuid else None)
        plan = await self._planner.plan(request, flat_settings, as_caller, self.store,
                                        fetched_docs)
        if plan.as_the_engine_ranks:
            return await self._as_the_engine_ranks(plan, as_caller, started)
        alongside = overview_alongside(request.params)
        # the total counted by round 0's lexical leg, where it can
        plan.context.overview = counted = counted_by_a_leg(request.body, request.params,
                                                          request.lexical)
        # the page and overview in the last text fetch's round trip, where they can go there,
        # or a page of plain hits from the docs the search fetched to label
        if alongside:
            plan.context.held = {}
        ahead = PageAhead(plan.context.engine, request.index, request.body, request.from_,
                          request.size, plan.chosen.window, counted, plan.context.held)
        if alongside:
            plan.context.page_ahead = ahead.ask
        key = (ranking_key(fingerprint, uuid, request, plan.chosen)
               if self.rankings is not None and uuid else None)
        try:
            if key is not None:
                answer = await self._from_kept_ranking(plan, as_caller, key, alongside,
                                                       started)
                if answer is not None:
                    return answer
            return await self._refined(plan, as_caller, ahead, counted, alongside, started,
                                       kept_as=key)
        except VectorUnreadableError as unreadable:
            # the method reads vectors this caller's search cannot: the engine's own answer
            log.info("answered [%s] as the engine ranks it: %s", request.index, unreadable)
            return await self._as_the_engine_ranks(plan, as_caller, started,
                                                   degraded_reason=VECTORS_UNREADABLE)

    async def _from_kept_ranking(self, plan: RefinePlan, as_caller: ClientEngine, key: str,
                                 alongside: bool, started: float) -> dict[str, Any] | None:
        """The answer cut from the ranking this caller's same search made (another page
        of it, most often): no round, one page fetch, the overview alongside where it can
        go there. None where none is kept, or the page misses a doc of the ranking (deleted
        or rewritten since): that ranking is then forgotten, and the search refined."""
        assert self.rankings is not None
        kept = self.rankings.get(key)
        if kept is None:
            return None
        request = plan.request
        overview: asyncio.Future[dict[str, Any]] = (
            _done({}) if alongside else asyncio.ensure_future(as_caller.search(
                request.index, overview_body(request.body), request.params)))
        try:
            with as_caller.engine_errors():
                page = plan_page(kept.window, request.from_, request.size)
                fetched, answer = await fetch_page(
                    as_caller, request.index, request.body, request.params, kept.window,
                    page, with_overview=alongside)
                for doc_key, name in fetched.doc_names.items():
                    plan.context.engine.remember_name(doc_key, name)
                page = replace(page, ids=tuple(map(plan.context.engine.known_id, page.ids)))
                if not window_fetched(page.ids, fetched.hits):
                    self.rankings.forget(key)
                    return None
                answer = answer if answer is not None else await overview
                shown = [*page.ids, *(doc for trace in kept.result.rounds
                                      for doc in trace.ranking[:TRACED_TOP])]
                result = await with_doc_ids(kept.result, plan.context, shown)
        finally:
            settle(overview)
        took = time.perf_counter() - started
        # this search's own cost: no pair labelled, no engine call of a method's
        result = replace(result, pairs_scored=0, engine_calls=0, timings=Timings(
            total_ms=took * 1000))
        self.stats.answered(plan.chosen.method, False, took, 0, result.timings, 0,
                            fetched.came_from)
        self.stats.rankings_reused.labels(method=plan.chosen.method).inc()
        return render(result, page, fetched, answer, took * 1000,
                      self._extra(plan, kept, fetched.came_from, reused=True))

    def _extra(self, plan: RefinePlan, ranked: Ranked, came_from: str, *, reused: bool
               ) -> dict[str, Any]:
        """The trace's keys beside the method's own: the index, where each option came
        from, the deadline and fallback, the window, where the page came from and whether
        the ranking is one an earlier page of the same search made."""
        return {"index": plan.request.index, "origins": plan.chosen.origins,
                "deadline_ms": plan.deadline_ms, "fallback": ranked.fallback,
                "window": len(ranked.window), "page": came_from, "ranking_reused": reused}

    async def _refined(self, plan: RefinePlan, as_caller: ClientEngine, ahead: PageAhead,
                       counted: Overview | None, alongside: bool, started: float,
                       kept_as: str | None = None) -> dict[str, Any]:
        """The rounds (the overview meanwhile), the page's fetch, the answer rendered; the
        ranking kept under `kept_as` for the caller's next page of the same search."""
        request = plan.request
        async with self._rounds.admitted() as holding:
            # the engine's total and aggregations for the request as sent: counted by a
            # leg, in the page's round trip, or meanwhile, where an error of its (a
            # malformed aggregation, say) is the answer at once
            overview: asyncio.Future[dict[str, Any]] = (
                _done({}) if alongside else asyncio.ensure_future(as_caller.search(
                    request.index, overview_body(request.body), request.params)))
            ranking = asyncio.ensure_future(self._rounds.rank(plan, holding))
            try:
                with as_caller.engine_errors():
                    ranked = await _unless_failed(ranking, overview)
                    known = plan.context.engine.known_id
                    # the page's docs by `_id` where met, by the doc key a pool leg named
                    # them by otherwise: the page's own hits then name them
                    page = plan_page(ranked.window, request.from_, request.size)
                    page = replace(page, ids=tuple(map(known, page.ids)))
                    by_leg = leg_answer(counted)
                    fetched, answer = await ahead.fetched(page) or await fetch_page(
                        as_caller, request.index, request.body, request.params,
                        ranked.window, page, with_overview=alongside and by_leg is None)
                    answer = answer if answer is not None else by_leg or await overview
                    for key, name in fetched.doc_names.items():
                        plan.context.engine.remember_name(key, name)
                    # and each round's top 10 the trace shows, by `_id` too
                    shown = [*page.ids, *(doc for trace in ranked.result.rounds
                                          for doc in trace.ranking[:TRACED_TOP])]
                    result = await with_doc_ids(ranked.result, plan.context, shown)
                    page = replace(page, ids=tuple(map(known, page.ids)))
            finally:
                settle(overview, ranking)
                ahead.settle()
        if kept_as is not None and self.rankings is not None:
            self.rankings.keep(kept_as, replace(ranked, result=result,
                                            window=[known(doc) for doc in ranked.window]))
        took = time.perf_counter() - started
        docs = plan.context.fetched_docs
        if self.doc_cache is not None and docs is not None and docs.missed:
            self.doc_cache.read_ahead(docs, plan.context.docs_ahead)
        chosen = plan.chosen
        self.stats.answered(chosen.method, result.degraded, took, result.pairs_scored,
                            result.timings, result.engine_calls, fetched.came_from)
        return render(result, page, fetched, answer, took * 1000,
                      self._extra(plan, ranked, fetched.came_from, reused=False))


    async def _as_the_engine_ranks(self, plan: RefinePlan, as_caller: ClientEngine,
                                   started: float, degraded_reason: str | None = None
                                   ) -> dict[str, Any]:
        """The request sent as it came, in one call: its method orders as the engine does,
        or (`degraded_reason`) it cannot refine for this caller."""
        request, chosen, timings = plan.request, plan.chosen, Timings()
        body = {**request.body, "from": request.from_, "size": request.size}
        with as_caller.engine_errors(), timings.engine():
            answer = await as_caller.search(request.index, body, request.params)
        took = time.perf_counter() - started
        timings.total_ms = took * 1000
        self.stats.answered(chosen.method, degraded_reason is not None, took, 0, timings, 1,
                            ENGINE_PAGE)
        extra = {"index": request.index, "origins": chosen.origins,
                 "deadline_ms": plan.deadline_ms, "fallback": None,
                 "window": len(answer.get("hits", {}).get("hits", [])), "page": ENGINE_PAGE}
        return as_the_engine_ranks(answer, chosen.method, chosen.options, timings, extra,
                                   degraded_reason)


async def _unless_failed(main: asyncio.Future[T], meanwhile: asyncio.Future[Any]) -> T:
    """`main`'s result; `meanwhile`'s error instead, as soon as it fails, if it fails
    first."""
    await asyncio.wait((meanwhile, main), return_when=asyncio.FIRST_EXCEPTION)
    if meanwhile.done():
        meanwhile.result()
    return await main


def _done(value: T) -> asyncio.Future[T]:
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future

