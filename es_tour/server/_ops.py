"""The sidecar's own endpoints for operators (health, stats, metrics) and its access log.

Who may read what:
- `GET /_tour/health` answers anyone, as a load balancer's probe carries no credentials; it
  tells only whether the sidecar serves, its engine kind and its models' names.
- `GET /_tour/stats` and `GET /_tour/metrics` answer a caller the engine lets read its
  cluster health (`GET /_cluster/health` as the caller: any caller of an unsecured engine,
  a monitoring role on a secured one); anyone else gets the engine's own 401 or 403.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from es_tour.errors import EngineError, MethodNotAllowedError, UpstreamError
from es_tour.server._service import TourService
from es_tour.server._stats import reason_label
from es_tour.server._upstream import Upstream, identity

DEGRADED_HEADER = "X-Es-Tour-Degraded"
DEADLINE = "deadline"  # why an answer is degraded, unless it says: the refinement ran out of time
# a probe must answer fast: an upstream that cannot answer `GET /` this soon is not serving
HEALTH_TIMEOUT_S = 5.0
MONITOR_PATH = "/_cluster/health"  # what a caller must be let read to read the stats
# scope key where a request's handler says what the sidecar did, for the access log
OUTCOME = "es_tour.outcome"
MAX_LOGGED_PATH = 200  # characters
access_log = logging.getLogger("es_tour.server.access")

# (status, JSON payload) or (status, Prometheus text)
Answer = tuple[int, "dict[str, Any] | str"]


async def ops_answer(request: Request, upstream: Upstream, service: TourService
                     ) -> Answer | None:
    """The answer of one of the sidecar's own endpoints; None for any other path."""
    endpoint = _ENDPOINTS.get(request.url.path)
    if endpoint is None:
        return None
    request.scope[OUTCOME] = "sidecar"  # answered here, not by the engine
    if request.method not in ("GET", "HEAD"):
        raise MethodNotAllowedError(f"Incorrect HTTP method for uri [{request.url.path}] and "
                                    f"method [{request.method}], allowed: [GET, HEAD]")
    return await endpoint(request, upstream, service)


async def _health(_: Request, upstream: Upstream, service: TourService) -> Answer:
    """200 while the upstream answers (a 401 or 403 included: it is there, and secured),
    503 when it does not answer or answers 5xx; asked as the sidecar, or anonymously."""
    try:
        status, _body = await asyncio.wait_for(upstream.get_own_json("/"), HEALTH_TIMEOUT_S)
    except (UpstreamError, TimeoutError):
        status = None
    serving = status is not None and status < 500
    stats = service.stats
    return (200 if serving else 503), {
        "status": "serving" if serving else "upstream_unavailable",
        "engine": upstream.engine,
        "upstream": {"reachable": status is not None, "status": status},
        "models": {"encoder": {"name": service.config.encoder,
                               "loaded": service.models.encoder_loaded},
                   "labelers": sorted(set(service.models.loaded()) |
                                      set(stats.loaded_labelers()))},
        # every worker's, read from the files they share; this one counts itself serving
        "workers": {"serving": max(stats.serving_workers(), 1),
                    "configured": service.config.workers},
    }


async def _stats(request: Request, upstream: Upstream, service: TourService) -> Answer:
    await _may_monitor(upstream, request.headers)
    return 200, service.stats.to_json()


async def _metrics(request: Request, upstream: Upstream, service: TourService) -> Answer:
    await _may_monitor(upstream, request.headers)
    return 200, service.stats.prometheus().decode()


async def _may_monitor(upstream: Upstream, headers: Mapping[str, str]) -> None:
    """Nothing when the engine lets the caller read its cluster health; else the engine's
    answer (401, 403) as the error."""
    status, body = await upstream.get_json(MONITOR_PATH, identity(headers))
    if status != 200:
        raise EngineError(status, body)


_ENDPOINTS: dict[str, Callable[[Request, Upstream, TourService], Awaitable[Answer]]] = {
    "/_tour/health": _health, "/_tour/stats": _stats, "/_tour/metrics": _metrics}


def degraded_reason(answer: Any) -> str | None:
    """Why a refined answer (an _msearch item's error is none) is not refined: the round-0
    ranking its deadline fell back to, or the reason it gives; None where it is refined."""
    tour = answer.get("ext", {}).get("tour", {}) if isinstance(answer, Mapping) else {}
    return tour.get("degraded_reason", DEADLINE) if tour.get("degraded") else None


def passthrough_outcome(reason: str) -> str:
    return f"passthrough: {reason_label(reason)}"  # its bounded prefix: no request text


class AccessLog:
    """One line per request when switched on: method, path, status, milliseconds and what
    the sidecar did. Never the query string, a body or a header: they hold query text and
    credentials."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app fails before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # the path escaped: a decoded %0A must not start a forged line
            path = json.dumps(scope["path"][:MAX_LOGGED_PATH], ensure_ascii=True)[1:-1]
            access_log.info("%s %s %d %.0fms %s", scope["method"], path, status,
                            (time.perf_counter() - started) * 1000, scope.get(OUTCOME, "proxied"))
