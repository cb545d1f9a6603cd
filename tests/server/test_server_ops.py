"""The sidecar's operator surface against a fake engine: who may read the stats, health as
the sidecar's own identity, the access log, the admission queue's depth, the drain time."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from es_tour.server import ServerConfig, create_app
from es_tour.server._ops import degraded_reason
from es_tour.server._process import drain_seconds, uvicorn_config
from es_tour.server._rounds import FALLBACK_TIMEOUT_MS, Rounds
from es_tour.server._stats import Stats

MONITOR = "Basic " + base64.b64encode(b"monitor:pw").decode()
SIDECAR = "Basic " + base64.b64encode(b"sidecar:pw").decode()


@asynccontextmanager
async def _sidecar(root_status: int = 401, **options: Any
                   ) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """A sidecar in front of an engine that lets MONITOR read its cluster health (403 to
    anyone else) and answers `GET /` with `root_status`; yields the client and the
    Authorization each `GET /` carried."""
    roots: list[str] = []

    async def root(request: web.Request) -> web.Response:
        roots.append(request.headers.get("authorization", ""))
        return web.json_response({}, status=root_status)

    async def health(request: web.Request) -> web.Response:
        if request.headers.get("authorization") == MONITOR:
            return web.json_response({"status": "green"})
        return web.json_response({"error": {"type": "security_exception", "reason": "no"},
                                  "status": 403}, status=403)

    async def search(request: web.Request) -> web.Response:
        return web.json_response({"hits": {"hits": []}})

    engine = web.Application()
    engine.router.add_get("/", root)
    engine.router.add_get("/_cluster/health", health)
    engine.router.add_post("/{index}/_search", search)
    async with TestServer(engine, host="127.0.0.1") as server:
        config = ServerConfig(upstream=f"http://127.0.0.1:{server.port}", engine="opensearch",
                              preload=False, **options)
        app = create_app(config)
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as client:
            yield client, roots


async def test_stats_and_metrics_answer_only_callers_the_engine_lets_read_cluster_health():
    async with _sidecar() as (client, _):
        for path in ("/_tour/stats", "/_tour/metrics"):
            refused = await client.get(path)
            assert refused.status_code == 403
            assert refused.json()["error"]["type"] == "security_exception"
            assert (await client.get(path, headers={"authorization": MONITOR})).status_code == 200


async def test_health_asks_as_the_sidecar_and_a_secured_engine_counts_as_reachable():
    async with _sidecar(service_credentials="sidecar:pw") as (client, roots):
        response = await client.get("/_tour/health", headers={"authorization": MONITOR})
    assert response.status_code == 200
    assert response.json()["upstream"] == {"reachable": True, "status": 401}
    assert roots == [SIDECAR]  # never the caller's credentials


async def test_health_is_503_when_the_engine_answers_5xx():
    async with _sidecar(root_status=503) as (client, roots):
        response = await client.get("/_tour/health")
    assert response.status_code == 503 and roots == [""]  # anonymous without credentials
    assert response.json()["status"] == "upstream_unavailable"


async def test_the_access_log_has_no_query_string_and_escapes_the_path(
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="es_tour.server.access")
    async with _sidecar(access_log=True) as (client, _):
        await client.post("/idx/_search?q=secret+words",
                          json={"query": {"match": {"text": "secret words"}}},
                          headers={"authorization": MONITOR})
        await client.get("/idx%0Aforged")
    search, forged = [r.getMessage() for r in caplog.records
                      if r.name == "es_tour.server.access"]
    assert search.startswith("POST /idx/_search 200 ")
    assert search.endswith("ms passthrough: index.tour.enabled is not true")
    assert "secret" not in search and "monitor" not in search and MONITOR not in search
    assert forged.startswith("GET /idx\\nforged 404 ") and forged.endswith("ms proxied")


async def test_the_access_log_tells_the_sidecars_own_endpoints_from_proxied_requests(
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="es_tour.server.access")
    async with _sidecar(access_log=True) as (client, _):
        await client.get("/_tour/health")
    (line,) = [r.getMessage() for r in caplog.records if r.name == "es_tour.server.access"]
    assert line.startswith("GET /_tour/health 200 ") and line.endswith("ms sidecar")


async def test_no_access_log_unless_switched_on(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="es_tour.server.access")
    async with _sidecar() as (client, _):
        await client.get("/_tour/health")
    assert not [r for r in caplog.records if r.name == "es_tour.server.access"]


class _Held:
    """A method whose search waits until `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def search(self, text: str, depth: int) -> str:
        await self.release.wait()
        return text


def _held_plan(held: _Held, text: str) -> Any:
    """What `Rounds` reads of a plan: the method (one that labels nothing), the text, the
    window."""
    return SimpleNamespace(method=held, text=text,
                           chosen=SimpleNamespace(window=1, method="knn"))


async def test_queue_depth_counts_the_refinements_waiting_for_a_slot():
    stats = Stats()
    rounds = Rounds(ServerConfig(upstream="http://127.0.0.1:1", max_refinements=1), stats)
    held = _Held()
    first = asyncio.ensure_future(rounds._refine(_held_plan(held, "a"), False))
    second = asyncio.ensure_future(rounds._refine(_held_plan(held, "b"), False))
    await asyncio.sleep(0.05)
    assert stats.queue._value.get() == 1  # the second waits for the one slot
    second.cancel()  # cancelled at its deadline while waiting: out of the queue
    await asyncio.sleep(0.05)
    assert stats.queue._value.get() == 0
    held.release.set()
    assert await first == "a"


def test_a_shutdown_waits_out_the_deadline_and_the_fallback():
    config = ServerConfig(upstream="http://127.0.0.1:1", deadline_ms=10_000)
    assert drain_seconds(config) == (10_000 + FALLBACK_TIMEOUT_MS) // 1000
    assert drain_seconds(ServerConfig(upstream="http://127.0.0.1:1", deadline_ms=2_500)) == 4
    built = uvicorn_config(config, "127.0.0.1", 0, None, "warning")
    assert built.timeout_graceful_shutdown == 11


async def test_a_started_sidecar_collects_cycles_rarely_and_never_rescans_its_startup_heap(
        ) -> None:
    import gc

    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, *threshold[1:])
    try:
        async with _sidecar():
            assert gc.get_threshold()[0] >= 10_000
            assert gc.get_freeze_count() > 0  # what the process held at startup
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.parametrize(("tour", "reason"), [
    ({"degraded": False}, None),
    ({"degraded": True, "fallback": "knn"}, "deadline"),
    ({"degraded": True, "degraded_reason": "vectors unreadable"}, "vectors unreadable"),
])
def test_a_degraded_answer_names_why_for_its_header(tour, reason):
    assert degraded_reason({"hits": {}, "ext": {"tour": tour}}) == reason
    assert degraded_reason({"error": {"type": "x"}, "status": 400}) is None
