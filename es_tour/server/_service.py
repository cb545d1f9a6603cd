"""One intercepted search: resolve the method, run it once under a deadline, render it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from es_tour.engines import ClientEngine, connect
from es_tour.errors import ConfigError
from es_tour.pipeline import SearchContext, SearchResult, Timings
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._options import Resolved, build, index_settings, resolve
from es_tour.server._render import render
from es_tour.server._request import SearchRequest

FALLBACK = "knn"  # round 0 of every method: the query's nearest neighbours


@dataclass
class _GivenVector(SearchContext):
    """A context whose query embedding is the vector the request brought."""

    vector: np.ndarray | None = None

    def embed_query(self, query: str, timings: Timings) -> np.ndarray:
        if self.vector is None:
            return super().embed_query(query, timings)
        return self.vector


class TourService:
    """Shared state of the intercepting side: config, models, and one engine adapter."""

    def __init__(self, config: ServerConfig, models: Models):
        self.config = config
        self.models = models
        self._engine: ClientEngine | None = None

    def engine(self, kind: str) -> ClientEngine:
        if self._engine is None:
            self._engine = connect(kind, self.config.upstreams)
        return self._engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.close()

    def defaults(self) -> dict[str, Any]:
        c = self.config
        return {"method": c.method, "labeler": c.labeler, "vector_field": c.vector_field,
                "text_fields": c.text_fields, "options": dict(c.options)}

    async def search(self, request: SearchRequest, flat_settings: dict[str, Any] | None,
                     engine: str) -> dict[str, Any]:
        """The engine-shaped response to `request`, TOUR's trace under ext.tour."""
        started = time.perf_counter()
        chosen = resolve(request.tour, index_settings(flat_settings or {}), self.defaults())
        if request.vector_field is not None and "vector_field" not in request.tour:
            chosen = replace(chosen, vector_field=request.vector_field)
        self._check(request, chosen)
        assert request.text is not None
        context = _GivenVector(self.engine(engine), request.index, self.models.encoder,
                               self.models.labeler(chosen.labeler), chosen.text_fields,
                               chosen.vector_field, request.vector)
        method = build(chosen.method, context, chosen.options)
        depth = request.from_ + request.size
        deadline_ms = request.timeout_ms or self.config.deadline_ms
        fallback = None
        try:
            result = await asyncio.wait_for(method.search(request.text, depth), deadline_ms / 1000)
        except TimeoutError:
            fallback = FALLBACK
            result = await self._round0(context, request.text, depth, chosen)
        extra = {"index": request.index, "origins": chosen.origins, "deadline_ms": deadline_ms,
                 "fallback": fallback}
        return render(result, request, (time.perf_counter() - started) * 1000, extra)

    def _check(self, request: SearchRequest, chosen: Resolved) -> None:
        limit = self.config.max_k
        k = chosen.options.get("k")
        if isinstance(k, int) and k > limit:
            raise ConfigError(f"k [{k}] is past this server's maximum [{limit}]")
        if request.from_ + request.size > limit:
            raise ConfigError(f"from + size [{request.from_ + request.size}] is past this "
                              f"server's maximum [{limit}]")
        if request.vector is not None:
            dimension = self.models.encoder.dimension
            if request.vector.shape != (dimension,):
                raise ConfigError(f"query vector has {request.vector.shape[0]} dimensions; the "
                                  f"retriever's have {dimension}")

    async def _round0(self, context: SearchContext, text: str, depth: int,
                      chosen: Resolved) -> SearchResult:
        """The kNN ranking the method starts from, marked degraded, named for the method."""
        k = max(depth, int(chosen.options.get("k", depth)), 1)
        result = await build(FALLBACK, context, {"k": min(k, 10_000)}).search(text, depth)
        return SearchResult(chosen.method, result.hits, result.rounds, result.pairs_scored,
                            result.engine_calls, result.timings, dict(chosen.options),
                            degraded=True)
