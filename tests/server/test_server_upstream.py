"""The settings lookup: per caller, bounded, failures returned and never cached."""

from __future__ import annotations

import asyncio
import base64
import multiprocessing
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from es_tour.errors import ConfigError, EngineError
from es_tour.server import ServerConfig, create_app
from es_tour.server._upstream import SettingsEpoch, Upstream, changes_settings, identity

ENABLED = {"index.tour.enabled": "true"}


class _Engine:
    """An HTTP server on loopback that answers GET /{index}/_settings with `status`,
    recording the headers of each request; and GET /{index}/_search with 200 for the
    callers in `searchers`, 403 for any other, recording theirs in `searches`. GET / is
    refused to everyone (401 anonymous, else 403: no caller holds cluster:monitor/main),
    recorded in `roots`. `product` is the X-Elastic-Product header of its answers."""

    def __init__(self, status: int = 200, searchers: tuple[str, ...] = (),
                 product: str | None = None):
        self.status = status
        self.requests: list[dict[str, str]] = []
        self.searchers = searchers
        self.searches: list[str] = []
        self.roots: list[str] = []
        self.product = {"X-Elastic-Product": product} if product else {}

    async def search(self, request: web.Request) -> web.Response:
        caller = request.headers.get("authorization", "")
        self.searches.append(caller)
        if caller in self.searchers:
            return web.json_response({"hits": {"hits": []}}, headers=self.product)
        return _refused(403)

    async def root(self, request: web.Request) -> web.Response:
        caller = request.headers.get("authorization", "")
        self.roots.append(caller)
        return _refused(403 if caller else 401)

    async def settings(self, request: web.Request) -> web.Response:
        self.requests.append({k.lower(): v for k, v in request.headers.items()})
        index = request.match_info["index"]
        if self.status == 200:
            return web.json_response({index: {"settings": ENABLED}})
        return web.json_response({"error": {"type": "x", "reason": "no"},
                                  "status": self.status}, status=self.status)


def _refused(status: int) -> web.Response:
    return web.json_response({"error": {"type": "security_exception", "reason": "no"},
                              "status": status}, status=status)


@asynccontextmanager
async def _upstream(fake: _Engine, epoch: SettingsEpoch | None = None,
                    **options) -> AsyncIterator[Upstream]:
    app = web.Application()
    app.router.add_get("/", fake.root)
    app.router.add_get("/{index}/_settings/{pattern}", fake.settings)
    app.router.add_get("/{index}/_search", fake.search)
    async with TestServer(app, host="127.0.0.1") as server:
        config = ServerConfig(upstream=f"http://127.0.0.1:{server.port}",
                              **{"engine": "opensearch", **options})
        upstream = Upstream(config, epoch)
        try:
            yield upstream
        finally:
            await upstream.close()


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {token}"}


async def test_settings_are_read_as_each_caller_and_cached_per_caller() -> None:
    engine = _Engine()
    async with _upstream(engine) as upstream:
        alice, bob = _basic("alice", "pw-a"), _basic("bob", "pw-b")
        assert await upstream.tour_settings("docs", alice) == ENABLED
        assert await upstream.tour_settings("docs", alice) == ENABLED
        assert await upstream.tour_settings("docs", bob) == ENABLED
        assert [r["authorization"] for r in engine.requests] == [
            alice["authorization"], bob["authorization"]]


async def test_the_settings_cache_keeps_only_the_most_recent_entries() -> None:
    engine = _Engine()
    async with _upstream(engine, settings_cache_size=2) as upstream:
        for index in ("one", "two", "three", "one"):
            await upstream.tour_settings(index, {})
        assert len(engine.requests) == 4  # "one" was dropped when "three" came in
        assert len(upstream._settings) == 2


@pytest.mark.parametrize("status", [401, 429, 503])
async def test_a_failed_lookup_is_the_engines_error_and_is_not_cached(status: int) -> None:
    engine = _Engine(status)
    async with _upstream(engine) as upstream:
        for _ in range(2):
            with pytest.raises(EngineError) as failed:
                await upstream.tour_settings("docs", {})
            assert failed.value.status == status
            assert failed.value.to_engine_error()["status"] == status
        assert len(engine.requests) == 2


@pytest.mark.parametrize("status", [403, 404])
async def test_no_index_the_caller_may_read_passes_through(status: int) -> None:
    engine = _Engine(status)
    async with _upstream(engine) as upstream:
        assert await upstream.tour_settings("docs", {}) is None
        assert await upstream.tour_settings("docs", {}) is None
        assert len(engine.requests) == 1


async def test_service_credentials_read_the_settings_for_callers_who_may_search_only() -> None:
    alice, bob = _basic("alice", "pw-a"), _basic("bob", "pw-b")
    engine = _Engine(searchers=(alice["authorization"],))
    async with _upstream(engine, service_credentials="sidecar:s3cret") as upstream:
        assert await upstream.tour_settings("docs", alice) == ENABLED
        assert await upstream.tour_settings("docs", alice) == ENABLED  # cached
        # bob may not search the index: its settings must not shape his answer
        assert await upstream.tour_settings("docs", bob) is None
        sidecar = _basic("sidecar", "s3cret")["authorization"]
        assert [r["authorization"] for r in engine.requests] == [sidecar, sidecar]
        assert engine.searches == [alice["authorization"], bob["authorization"]]
        assert "s3cret" not in repr(upstream.config)


async def test_a_write_during_a_lookup_keeps_the_answer_it_made_stale_out_of_the_cache(
        ) -> None:
    engine = _Engine()
    async with _upstream(engine) as upstream:
        lookup = asyncio.ensure_future(upstream.tour_settings("docs", {}))
        await asyncio.sleep(0)  # the lookup now waits on the engine
        upstream._settings_epoch.advance()  # as a settings write passed through meanwhile
        assert await lookup == ENABLED
        assert not upstream._settings
        await upstream.tour_settings("docs", {})
        assert len(engine.requests) == 2 and len(upstream._settings) == 1


async def test_a_settings_write_through_one_worker_is_seen_by_every_worker() -> None:
    shared = multiprocessing.get_context("spawn").Value("Q", 0)
    engine = _Engine()
    async with _upstream(engine, SettingsEpoch(shared)) as one, \
            _upstream(engine, SettingsEpoch(shared)) as other:
        assert await other.tour_settings("docs", {}) == ENABLED
        assert await other.tour_settings("docs", {}) == ENABLED
        assert len(engine.requests) == 1  # cached
        SettingsEpoch(shared).advance()  # `one` passed a settings write through
        assert await other.tour_settings("docs", {}) == ENABLED
        assert len(engine.requests) == 2  # read afresh, well within settings_ttl_s
        assert await one.tour_settings("docs", {}) == ENABLED
        assert await other.tour_settings("docs", {}) == ENABLED
        assert len(engine.requests) == 3 and shared.value == 1


@pytest.mark.parametrize(("product", "kind"), [(None, "opensearch"),
                                               ("Elasticsearch", "elasticsearch")])
async def test_the_engine_is_found_by_any_caller_who_may_search_not_by_who_came_first(
        product: str | None, kind: str) -> None:
    alice, bob = _basic("alice", "pw-a"), _basic("bob", "pw-b")
    engine = _Engine(searchers=(alice["authorization"],), product=product)
    async with _upstream(engine, engine=None) as upstream:
        await upstream.detect_startup()  # the anonymous GET / is refused: still unknown
        assert upstream.engine is None and engine.roots == [""]
        # bob may not search docs: he gets the engine's own 403, and decides nothing
        with pytest.raises(EngineError) as refused:
            await upstream.detect_engine(bob, "docs")
        assert refused.value.status == 403 and upstream.engine is None
        # alice may search docs though GET / is refused to her: her search names the engine
        assert await upstream.detect_engine(alice, "docs") == kind
        assert await upstream.detect_engine(bob, "docs") == kind  # known now: no call
        assert engine.roots == [""]  # GET / was never asked as a caller
        assert engine.searches == [bob["authorization"], alice["authorization"]]


async def test_an_engine_that_answers_at_startup_is_known_before_any_caller() -> None:
    async def root(request: web.Request) -> web.Response:
        assert "authorization" not in request.headers
        return web.json_response({"version": {"number": "8.19.21"}},
                                 headers={"X-Elastic-Product": "Elasticsearch"})

    app = web.Application()
    app.router.add_get("/", root)
    async with TestServer(app, host="127.0.0.1") as server:
        upstream = Upstream(ServerConfig(upstream=f"http://127.0.0.1:{server.port}"))
        try:
            await upstream.detect_startup()
            assert upstream.engine == "elasticsearch"
        finally:
            await upstream.close()


async def test_an_unreachable_engine_at_startup_leaves_the_kind_unknown() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    upstream = Upstream(ServerConfig(upstream=f"http://127.0.0.1:{port}"))
    try:
        await upstream.detect_startup()  # no exception: the sidecar starts anyway
        assert upstream.engine is None
    finally:
        await upstream.close()


@pytest.mark.parametrize(("path", "changes"), [
    ("/docs", True), ("/docs/_settings", True), ("/_all/_settings", True),
    ("/_aliases", True), ("/docs/_alias/current", True), ("/docs/_close", True),
    ("/docs/_doc/1", False), ("/docs/_bulk", False), ("/_bulk", False),
    ("/docs/_search", False), ("/_cluster/settings", False),
])
def test_writes_that_may_change_index_settings_are_recognised(path: str, changes: bool) -> None:
    assert changes_settings(path) is changes


def test_identity_headers_are_the_callers_credentials_only() -> None:
    headers = {"authorization": "Bearer x", "cookie": "session=1", "securitytenant": "t",
               "es-security-runas-user": "u", "es-client-authentication": "SharedSecret s",
               "content-type": "application/json", "host": "h"}
    assert identity(headers) == {"authorization": "Bearer x", "cookie": "session=1",
                                 "securitytenant": "t", "es-security-runas-user": "u",
                                 "es-client-authentication": "SharedSecret s"}


def test_credentials_in_the_upstream_url_are_refused_without_being_echoed() -> None:
    with pytest.raises(ConfigError) as refused:
        ServerConfig(upstream="http://admin:hunter2@127.0.0.1:9200")
    assert "hunter2" not in str(refused.value) and "service_credentials" in str(refused.value)


async def test_forwarding_adds_no_headers_and_carries_no_cookie_between_callers() -> None:
    seen: list[dict[str, str]] = []

    async def engine(request: web.Request) -> web.Response:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        answer = web.json_response({"cluster_name": "c"})
        answer.set_cookie("session", "alice-only")  # as a secured engine's login may
        return answer

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", engine)
    async with TestServer(app, host="127.0.0.1") as server:
        config = ServerConfig(upstream=f"http://127.0.0.1:{server.port}", engine="opensearch",
                              preload=False)
        sidecar = create_app(config)
        async with sidecar.router.lifespan_context(sidecar), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=sidecar), base_url="http://sidecar") as client:
            for name in ("accept", "accept-encoding", "user-agent"):
                del client.headers[name]  # the client sends only what each call gives
            alice = await client.get("/_cluster/health", headers=_basic("alice", "pw-a"))
            client.cookies.clear()  # alice's client got the cookie; the next caller has none
            anonymous = await client.get("/_cluster/health")
    assert alice.status_code == anonymous.status_code == 200
    assert alice.json() == {"cluster_name": "c"}
    assert seen[0]["authorization"] == _basic("alice", "pw-a")["authorization"]
    assert "authorization" not in seen[1] and "cookie" not in seen[1]
    for headers in seen:
        assert not {"accept", "accept-encoding", "user-agent", "content-type"} & headers.keys()


async def test_settings_are_read_without_the_plugins_declared_defaults() -> None:
    """An unset setting must fall to the server's and the method's defaults, not to the
    plugin's (docs/plugin.md, "The declared defaults are never applied")."""

    class WithDefaults(_Engine):
        async def settings(self, request: web.Request) -> web.Response:
            self.requests.append({"query": request.query_string})
            body = {"settings": ENABLED, "defaults": {"index.tour.budget": "20"}}
            wanted = request.query.get("include_defaults") == "true"
            return web.json_response({request.match_info["index"]: body if wanted else
                                      {"settings": ENABLED}})

    engine = WithDefaults()
    async with _upstream(engine) as upstream:
        assert await upstream.tour_settings("docs", {}) == ENABLED
    assert "include_defaults" not in engine.requests[0]["query"]
