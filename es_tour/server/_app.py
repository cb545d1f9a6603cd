"""The sidecar's HTTP surface: answer TOUR searches, proxy everything else verbatim."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from es_tour.engines import json_bytes
from es_tour.errors import BodyTooLargeError, ConfigError, EsTourError, InternalError
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._ops import (
    DEGRADED_HEADER,
    OUTCOME,
    AccessLog,
    degraded_reason,
    ops_answer,
    passthrough_outcome,
)
from es_tour.server._passthrough import Passthrough, Reason
from es_tour.server._plan import enabled, servable
from es_tour.server._playground import playground_routes
from es_tour.server._request import (
    MalformedJson,
    SearchRequest,
    check_path,
    inflated,
    msearch_params,
    msearch_target,
    parse_body,
    parse_msearch,
    read_body,
    search_target,
)
from es_tour.server._service import TourService
from es_tour.server._stats import CONTENT_TYPE as METRICS_CONTENT_TYPE
from es_tour.server._stats import SYNC_S
from es_tour.server._template import rendered_search, template_target
from es_tour.server._upstream import PASSTHROUGH_HEADER, SettingsEpoch, Upstream, identity

log = logging.getLogger("es_tour.server")
# one line per search the sidecar does not refine, with its reason: how much traffic is refined
passthrough_log = logging.getLogger("es_tour.server.passthrough")
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


# A search decodes thousands of short-lived JSON containers: at Python's default threshold
# (700) the young collections cost a sidecar ~0.5 ms a search and a full collection ~70 ms
# now and then (measured with gc.callbacks over 105 SciFact searches); refcounting frees
# nearly all of them anyway.
YOUNG_COLLECTION_THRESHOLD = 20_000


def collect_rarely() -> None:
    """Run the cycle collector rarely, and never again over what the process holds once
    started (models, tokenizers, imported modules): it is frozen out of later scans."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def create_app(config: ServerConfig, models: Models | None = None,
               settings_epoch: SettingsEpoch | None = None) -> Starlette:
    """The ASGI app. `models` may be shared between apps (tests, benchmarks);
    `settings_epoch` between the workers of one sidecar."""
    shared = models or Models(config.encoder)
    upstream = Upstream(config, settings_epoch)
    service = TourService(config, shared)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if config.preload:
            await asyncio.to_thread(shared.preload, config.labeler)
        collect_rarely()
        await upstream.detect_startup()
        service.stats.workers.inc()  # serving: what /_tour/health counts across workers
        syncing = asyncio.ensure_future(_sync_stats(service)) \
            if service.stats.multiprocess_dir else None
        try:
            yield
        finally:
            service.stats.workers.dec()
            if syncing is not None:
                syncing.cancel()
            await service.close()
            await upstream.close()

    async def handle(request: Request) -> Response:
        try:
            ops = await ops_answer(request, upstream, service)
            if ops is not None:
                status, payload = ops
                if isinstance(payload, str):
                    return Response(payload, status, media_type=METRICS_CONTENT_TYPE)
                return _json(payload, status, upstream.engine)
            return await _dispatch(request, upstream, service)
        except EsTourError as exc:
            return _error(exc, upstream.engine)

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("es-tour sidecar failed on %s %s", request.method, request.url.path)
        return _error(InternalError(), upstream.engine)

    # without the playground its paths reach the engine, which answers them as unknown
    routes = [*(playground_routes(config) if config.playground else []),
              Route("/{path:path}", handle, methods=METHODS)]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: crash})
    if config.access_log:
        app.add_middleware(AccessLog)
    return app


async def _sync_stats(service: TourService) -> None:
    """Under several workers: this one's labeler and store counts into the shared files
    now and then, so a scrape another worker answers sees them."""
    while True:
        await asyncio.sleep(SYNC_S)
        service.stats.sync()


async def _dispatch(request: Request, upstream: Upstream, service: TourService) -> Response:
    check_path(request.scope["raw_path"], request.scope["query_string"])
    raw_path = request.scope["raw_path"].decode("latin-1")
    template = template_target(request.method, raw_path)  # rendered below, then a _search
    target = search_target(request.method, raw_path) if template is None else template
    if target is None:
        default_index = msearch_target(request.method, raw_path)
        if default_index is not None:
            return await _msearch(request, default_index, upstream, service)
        return await upstream.forward(request)
    raw = await read_body(request, service.config.max_body_bytes)
    settings = await _settings(upstream, target, request.headers)
    index_enabled = enabled(settings)
    try:
        body = parse_body(inflated(raw, request.headers.get("content-encoding"),
                                   service.config.max_body_bytes))
    except (MalformedJson, BodyTooLargeError):
        if not index_enabled:  # the engine answers its own malformed requests
            return await upstream.forward(request, raw)
        raise
    try:
        if template is not None:
            if not index_enabled:
                raise Passthrough(Reason.NOT_ENABLED)
            body = await rendered_search(upstream, body, request.headers)
        search = servable(target, dict(request.query_params), body, settings,
                          service.config.text_fields)
    except Passthrough as verdict:
        _log_passthrough(service, request.method, target, verdict)
        request.scope[OUTCOME] = passthrough_outcome(verdict.reason)
        return await upstream.forward(request, raw, reason=verdict.header())
    engine = await upstream.detect_engine(request.headers, target)
    answer = await service.search(search, settings, engine, identity(request.headers))
    degraded = degraded_reason(answer)
    request.scope[OUTCOME] = f"degraded: {degraded}" if degraded else "refined"
    return _json(answer, 200, engine, pretty=search.pretty,
                 headers={DEGRADED_HEADER: degraded} if degraded else None)


async def _settings(upstream: Upstream, index: str, headers: Mapping[str, str]
                    ) -> dict[str, Any] | None:
    if index and "," not in index and "*" not in index:
        return await upstream.tour_settings(index, headers)
    return None


def _log_passthrough(service: TourService, method: str, index: str,
                     verdict: Passthrough) -> None:
    service.stats.passthrough(verdict.reason)
    passthrough_log.info("passed through %s %s/_search: %s", method, index or "_all",
                         verdict.header())


async def _msearch(request: Request, default_index: str, upstream: Upstream,
                   service: TourService) -> Response:
    """Each search of an `_msearch` judged on its own: those it refines run at once (within
    the admission slots), the rest go to the engine as one `_msearch`, and the answers come
    back in order in the engine's shape, an item's error in its place."""
    started = time.perf_counter()
    try:
        each = msearch_params(request.query_params)
    except Passthrough as verdict:
        _log_passthrough(service, "POST", default_index, verdict)
        return await upstream.forward(request, reason=verdict.header())
    raw = await read_body(request, service.config.max_body_bytes)
    try:
        items = parse_msearch(inflated(raw, request.headers.get("content-encoding"),
                                       service.config.max_body_bytes), default_index)
    except (MalformedJson, BodyTooLargeError, ConfigError):
        return await upstream.forward(request, raw)  # the engine's own 400
    # per item: (the search and its index's settings) to refine, a Passthrough, or an error
    plans: list[tuple[SearchRequest, dict[str, Any] | None] | Passthrough | EsTourError] = []
    for item in items:
        try:
            settings = await _settings(upstream, item.index, request.headers)
            plans.append((servable(item.index, {**each, **item.params}, item.body, settings,
                                   service.config.text_fields), settings))
        except Passthrough as verdict:
            _log_passthrough(service, "POST", item.index, verdict)
            plans.append(verdict)
        except EsTourError as exc:
            plans.append(exc)
    passed = {i: plan.header() for i, plan in enumerate(plans) if isinstance(plan, Passthrough)}
    reasons = "; ".join(f"[{i}] {reason}" for i, reason in passed.items())
    request.scope[OUTCOME] = f"msearch: {len(plans)} items, {len(passed)} passed through"
    if len(passed) == len(plans):
        return await upstream.forward(request, raw, reason=reasons)
    to_refine = [plan[0] for plan in plans if isinstance(plan, tuple)]
    engine = await upstream.detect_engine(request.headers, to_refine[0].index) if to_refine \
        else upstream.engine  # nothing refined: the kind only names the answer's product
    caller = identity(request.headers)

    async def answer(search: SearchRequest, settings: dict[str, Any] | None) -> dict[str, Any]:
        assert engine is not None  # detected: this item is servable
        try:
            return {**await service.search(search, settings, engine, caller), "status": 200}
        except EsTourError as exc:
            return exc.to_engine_error()

    refined = [answer(*plan) for plan in plans if isinstance(plan, tuple)]
    forwarded = upstream.msearch([items[i] for i in passed], request.headers,
                                 request.scope["query_string"]) if passed else _nothing()
    *ours, theirs = await asyncio.gather(*refined, forwarded)
    mine, engines = iter(ours), iter(theirs)
    responses = [next(engines) if isinstance(plan, Passthrough)
                 else plan.to_engine_error() if isinstance(plan, EsTourError) else next(mine)
                 for plan in plans]
    refined_at = [i for i, plan in enumerate(plans) if isinstance(plan, tuple)]
    reasons_at = [(i, degraded_reason(response))
                  for i, response in zip(refined_at, ours, strict=True)]
    degraded = "; ".join(f"[{i}] {why}" for i, why in reasons_at if why)
    headers = {PASSTHROUGH_HEADER: reasons} if reasons else {}
    if degraded:
        headers[DEGRADED_HEADER] = degraded
    return _json({"took": round((time.perf_counter() - started) * 1000),
                  "responses": responses}, 200, engine, headers=headers,
                 pretty=request.query_params.get("pretty", "false") in ("", "true"))


async def _nothing() -> list[dict[str, Any]]:
    return []


def _error(exc: EsTourError, engine: str | None) -> Response:
    """Every error a client sees, in the engine's shape, from the one table in errors.py."""
    return _json(exc.to_engine_error(), exc.status, engine, headers=exc.headers)


def _json(payload: dict[str, Any], status: int, engine: str | None, *,
          pretty: bool = False, headers: Mapping[str, str] | None = None) -> Response:
    # orjson: a page of hits with their sources is ~100 KB, a few ms in the json module
    text = json_bytes(payload, _plain, pretty=pretty)
    out = {"X-Elastic-Product": "Elasticsearch"} if engine == "elasticsearch" else {}
    return Response(text, status_code=status, headers={**out, **(headers or {})},
                    media_type="application/json; charset=UTF-8")


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, tuple, frozenset)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
