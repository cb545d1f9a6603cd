"""One intercepted search: resolve the method, admit it, rank the window under a deadline
while the engine counts the request as sent (the overview), have the engine fetch the page
(`_fetch`), render it.

Refinements run on an event loop of their own (`RefineLoop`), apart from the loop that
serves pass-through traffic, and model inference on the pipeline's ModelPool. At most
`max_refinements` searches refine at once; the others wait for a slot until their
deadline (and then answer with the round-0 ranking) or, with `when_full: reject`, get a
429 at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cachetools import TTLCache

from es_tour.engines import ClientEngine, VectorField, connect
from es_tour.errors import ConfigError, OverloadedError, UpstreamTimeoutError
from es_tour.pipeline import (
    ModelPool,
    SearchContext,
    SearchMethod,
    SearchResult,
    VectorStore,
)
from es_tour.server._config import ServerConfig
from es_tour.server._fetch import fetch_page, overview_body, plan_page
from es_tour.server._loop import RefineLoop
from es_tour.server._models import Models
from es_tour.server._options import Resolved, build, check_encoder_fits, index_settings, resolve
from es_tour.server._render import render
from es_tour.server._request import SearchRequest
from es_tour.server._stats import Stats

FALLBACK = "knn"  # round 0 of every method: the query's nearest neighbours
# past the deadline, the round-0 call gets this long: an engine that is restarting can
# accept a connection and not answer, and the caller was promised an answer by now
FALLBACK_TIMEOUT_MS = 1_000
# how long what an index's vector field holds (dimension, in `_source` or not) is kept: it
# cannot change while the index lives, but the name may be given to a new index
VECTOR_FIELD_TTL_S = 60.0


class TourService:
    """Shared state of the intercepting side: config, models, the model pool, the admission
    slots, and one engine adapter whose connection pool every request shares, each with its
    caller's credentials."""

    def __init__(self, config: ServerConfig, models: Models):
        self.config = config
        self.models = models
        self.pool = ModelPool(config.model_workers)
        self._loop = RefineLoop()  # everything below lives on it
        self._slots = asyncio.Semaphore(config.max_refinements)
        self._engine: ClientEngine | None = None
        self.store: VectorStore | None = None  # made with the engine adapter
        self._writer: asyncio.Task[None] | None = None
        # (index, field) -> what it holds; bounded like the settings cache
        self._vector_fields: TTLCache[tuple[str, str], VectorField] = TTLCache(
            maxsize=config.settings_cache_size, ttl=VECTOR_FIELD_TTL_S)
        self.stats = Stats(models.loaded, lambda: self.store)

    def engine(self, kind: str) -> ClientEngine:
        if self._engine is None:
            self._engine = connect(kind, self.config.upstreams, self.config.upstream_tls)
            if self.config.vector_store:
                self.store = VectorStore(self._engine.with_headers(self.config.service_identity))
                self._writer = asyncio.get_running_loop().create_task(self.store.run_writer())
        return self._engine

    async def close(self) -> None:
        self.pool.close()
        await self._loop.close(self._close())

    async def _close(self) -> None:
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
        started = time.perf_counter()
        chosen = resolve(request.tour, index_settings(flat_settings or {}), self.defaults())
        if request.vector_field is not None and "vector_field" not in request.tour:
            chosen = replace(chosen, vector_field=request.vector_field)
        assert request.text is not None
        # a first use loads the model from disk: seconds the event loop must not wait
        models = self.models
        encoder, labeler = await asyncio.to_thread(
            lambda: (models.query_encoder(chosen.encoder), models.labeler(chosen.labeler)))
        as_caller = self.engine(engine).with_headers(caller)
        vectors = await self._vector_field(as_caller, request.index, chosen, encoder.dimension)
        searcher = as_caller.with_filters(request.filters)
        if not vectors.in_source:
            searcher = searcher.with_doc_value_vectors(vectors.name)
        # the request's own vector, if it brought one; else its embedding, kept: past the
        # deadline, round 0 reuses it rather than queue behind the encoder
        given = {} if request.vector is None else {request.text: request.vector}
        context = SearchContext(searcher, request.index, encoder, labeler, chosen.text_fields,
                                chosen.vector_field, self.pool, self.config.label_batch,
                                request.lexical, self.store, query_vectors=given)
        # every option checked here; a learned policy is read from disk: off the loop too
        method = await asyncio.to_thread(build, chosen.method, context, chosen.options)
        self._check(request, chosen, encoder.dimension)
        holding = self.config.when_full == "reject"
        if holding:
            if self._slots.locked():
                self.stats.rejected.inc()
                raise OverloadedError(
                    f"all {self.config.max_refinements} refinement slots are busy; retry later",
                    self.config.retry_after_s)
            # a free slot is taken without suspending: no other request checks in between
            await self._slots.acquire()
        deadline_ms = request.timeout_ms or self.config.deadline_ms
        # the engine's total and aggregations for the request as sent, meanwhile: an error
        # of its (a malformed aggregation, say) is the answer at once
        overview = asyncio.ensure_future(as_caller.search(
            request.index, overview_body(request.body), request.params))
        ranking = asyncio.ensure_future(
            self._ranking(method, context, request.text, chosen, holding, deadline_ms))
        try:
            with as_caller.engine_errors():
                await asyncio.wait((overview, ranking), return_when=asyncio.FIRST_EXCEPTION)
                if overview.done():
                    overview.result()
                result, fallback = await ranking
                window = [hit.id for hit in result.hits[: chosen.window]]
                plan = plan_page(window, request.from_, request.size)
                fetched = await fetch_page(as_caller, request.index, request.body,
                                           request.params, window, plan)
                counted = await overview
        finally:
            if holding:
                self._slots.release()
            for task in (overview, ranking):
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # an error another answered first is not left unread
        took = time.perf_counter() - started
        self.stats.answered(chosen.method, result.degraded, took, result.pairs_scored,
                            result.timings.model_ms)
        extra = {"index": request.index, "origins": chosen.origins, "deadline_ms": deadline_ms,
                 "fallback": fallback, "window": len(window)}
        return render(result, plan, fetched, counted, took * 1000, extra)

    async def _ranking(self, method: SearchMethod, context: SearchContext, text: str,
                       chosen: Resolved, holding: bool, deadline_ms: int
                       ) -> tuple[SearchResult, str | None]:
        """The method's ranking of the whole window, whatever the page (every page of one
        search is cut from one ranking), and None; past the deadline, round 0's and the
        fallback's name."""
        try:
            return await asyncio.wait_for(self._refine(method, text, chosen.window, holding),
                                          deadline_ms / 1000), None
        except TimeoutError:
            return await self._round0(context, text, chosen.window, chosen), FALLBACK

    async def _refine(self, method: SearchMethod, text: str, depth: int,
                      holding: bool) -> SearchResult:
        """The method's search once a slot is free (or in the slot the request `holding`
        took); cancelled at the deadline, between two labeler batches at the latest (the
        batch running finishes on its thread)."""
        if holding:
            return await method.search(text, depth)
        self.stats.queue.inc()
        try:
            await self._slots.acquire()
        finally:  # a request cancelled at its deadline while waiting leaves the queue too
            self.stats.queue.dec()
        try:
            return await method.search(text, depth)
        finally:
            self._slots.release()

    async def _vector_field(self, engine: ClientEngine, index: str, chosen: Resolved,
                            dimension: int) -> VectorField:
        """The index's vector field, read from one doc and cached (no caller's answer depends
        on who read it); a 400 naming both dimensions when the encoder's differs from it."""
        key = (index, chosen.vector_field)
        found = self._vector_fields.get(key)
        if found is None:
            with engine.engine_errors():
                found = await engine.vector_field(index, chosen.vector_field)
            if found.dimension is not None:  # an index with no vector yet is asked again
                self._vector_fields[key] = found
        check_encoder_fits(found, chosen.encoder, dimension, index)
        return found

    def _check(self, request: SearchRequest, chosen: Resolved, dimension: int) -> None:
        c = self.config
        caps = (("k", chosen.options.get("k"), c.max_k),
                ("window", chosen.window, c.max_size),
                ("max_rounds", chosen.options.get("max_rounds"), c.max_rounds),
                ("top_k", chosen.options.get("top_k"), c.max_top_k),
                ("timeout_ms", request.timeout_ms, c.max_timeout_ms))
        for name, value, limit in caps:
            if isinstance(value, int) and value > limit:
                raise ConfigError(f"{name} [{value}] is past this server's maximum [{limit}]")
        if request.vector is not None:
            if request.vector.shape != (dimension,):
                raise ConfigError(f"query vector has {request.vector.shape[0]} dimensions; the "
                                  f"encoder [{chosen.encoder}]'s have {dimension}")

    async def _round0(self, context: SearchContext, text: str, depth: int,
                      chosen: Resolved) -> SearchResult:
        """The kNN ranking the method starts from, marked degraded, named for the method.

        Its one model call, the query embedding, has a thread of its own in the pool."""
        k = max(depth, int(chosen.options.get("k", depth)), 1)
        try:
            result = await asyncio.wait_for(build(FALLBACK, context, {"k": k}).search(text, depth),
                                            FALLBACK_TIMEOUT_MS / 1000)
        except TimeoutError:
            raise UpstreamTimeoutError(
                f"the refinement passed its deadline and the engine did not answer the round-0 "
                f"search within {FALLBACK_TIMEOUT_MS} ms more") from None
        return SearchResult(chosen.method, result.hits, result.rounds, result.pairs_scored,
                            result.engine_calls, result.timings, dict(chosen.options),
                            degraded=True)
