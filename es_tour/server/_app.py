"""The sidecar's HTTP surface: answer TOUR searches, proxy everything else verbatim."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from es_tour.errors import BodyTooLargeError, ConfigError, EsTourError, InternalError
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._playground import playground_routes
from es_tour.server._request import (
    MalformedJson,
    Passthrough,
    check_path,
    inflated,
    parse_body,
    parse_search,
    read_body,
    search_target,
    wants_tour,
)
from es_tour.server._service import TourService
from es_tour.server._template import rendered_search, template_target
from es_tour.server._upstream import Upstream, identity

log = logging.getLogger("es_tour.server")
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


def create_app(config: ServerConfig, models: Models | None = None) -> Starlette:
    """The ASGI app. `models` may be shared between apps (tests, benchmarks)."""
    shared = models or Models(config.encoder)
    upstream = Upstream(config)
    service = TourService(config, shared)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if config.preload:
            await asyncio.to_thread(shared.preload, config.labeler)
        try:
            yield
        finally:
            await service.close()
            await upstream.close()

    async def handle(request: Request) -> Response:
        try:
            return await _dispatch(request, upstream, service)
        except EsTourError as exc:
            return _error(exc, upstream.engine)

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("es-tour sidecar failed on %s %s", request.method, request.url.path)
        return _error(InternalError(), upstream.engine)

    routes = [*playground_routes(config), Route("/{path:path}", handle, methods=METHODS)]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: crash})


async def _dispatch(request: Request, upstream: Upstream, service: TourService) -> Response:
    check_path(request.scope["raw_path"], request.scope["query_string"])
    path = request.scope["raw_path"].decode("latin-1")
    template = template_target(request.method, path)  # rendered below, then a _search
    target = search_target(request.method, path) if template is None else template
    if target is None:
        return await upstream.forward(request)
    raw = await read_body(request, service.config.max_body_bytes)
    settings = None
    if target and "," not in target and "*" not in target:
        settings = await upstream.tour_settings(target, request.headers)
    enabled = str((settings or {}).get("index.tour.enabled", "false")).lower() == "true"
    try:
        body = parse_body(inflated(raw, request.headers.get("content-encoding"),
                                   service.config.max_body_bytes))
    except (MalformedJson, BodyTooLargeError):
        if not enabled:  # the engine answers its own malformed requests
            return await upstream.forward(request, raw)
        raise
    explicit = wants_tour(body)
    params = dict(request.query_params)
    if not explicit and not enabled:
        return await upstream.forward(request, raw)
    try:
        if template is not None:
            body = await rendered_search(upstream, body, request.headers)
            explicit = wants_tour(body)
        search = parse_search(target, params, body, explicit=explicit)
    except Passthrough as verdict:
        if explicit:  # the engine would reject ext.tour; say why the sidecar did not serve it
            raise _unservable(verdict.reason) from None
        return await upstream.forward(request, raw, reason=verdict.header())
    engine = await upstream.detect_engine(request.headers)
    answer = await service.search(search, settings, engine, identity(request.headers))
    return _json(answer, 200, engine, pretty=search.pretty)


def _unservable(reason: str) -> EsTourError:
    return ConfigError(f"ext.tour cannot be served for this request ({reason}); "
                       "drop ext.tour to run it as a plain search")


def _error(exc: EsTourError, engine: str | None) -> Response:
    """Every error a client sees, in the engine's shape, from the one table in errors.py."""
    return _json(exc.to_engine_error(), exc.status, engine, headers=exc.headers)


def _json(payload: dict[str, Any], status: int, engine: str | None, *,
          pretty: bool = False, headers: Mapping[str, str] | None = None) -> Response:
    text = json.dumps(payload, indent=2 if pretty else None, default=_plain,
                      separators=None if pretty else (",", ":"))
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
