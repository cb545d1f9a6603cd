"""The settings lookup: per caller, bounded, failures returned and never cached."""

from __future__ import annotations

import base64

import httpx
import pytest

from es_tour.errors import ConfigError, EngineError
from es_tour.server import ServerConfig
from es_tour.server._upstream import Upstream, identity

ENABLED = {"index.tour.enabled": "true"}


class _Engine:
    """Answers GET /{index}/_settings with `status`, recording each request."""

    def __init__(self, status: int = 200):
        self.status = status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        index = request.url.path.split("/")[1]
        if self.status == 200:
            return httpx.Response(200, json={index: {"settings": ENABLED}})
        return httpx.Response(self.status, json={"error": {"type": "x", "reason": "no"},
                                                 "status": self.status})


def _upstream(engine: _Engine, **options) -> Upstream:
    config = ServerConfig(upstream="http://127.0.0.1:9", engine="opensearch", **options)
    upstream = Upstream(config)
    upstream._client = httpx.AsyncClient(base_url=config.base_url,
                                         transport=httpx.MockTransport(engine))
    return upstream


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {token}"}


async def test_settings_are_read_as_each_caller_and_cached_per_caller() -> None:
    engine = _Engine()
    upstream = _upstream(engine)
    alice, bob = _basic("alice", "pw-a"), _basic("bob", "pw-b")
    assert await upstream.tour_settings("docs", alice) == ENABLED
    assert await upstream.tour_settings("docs", alice) == ENABLED
    assert await upstream.tour_settings("docs", bob) == ENABLED
    assert [r.headers["authorization"] for r in engine.requests] == [
        alice["authorization"], bob["authorization"]]


async def test_the_settings_cache_keeps_only_the_most_recent_entries() -> None:
    engine = _Engine()
    upstream = _upstream(engine, settings_cache_size=2)
    for index in ("one", "two", "three", "one"):
        await upstream.tour_settings(index, {})
    assert len(engine.requests) == 4  # "one" was dropped when "three" came in
    assert len(upstream._settings) == 2


@pytest.mark.parametrize("status", [401, 429, 503])
async def test_a_failed_lookup_is_the_engines_error_and_is_not_cached(status: int) -> None:
    engine = _Engine(status)
    upstream = _upstream(engine)
    for _ in range(2):
        with pytest.raises(EngineError) as failed:
            await upstream.tour_settings("docs", {})
        assert failed.value.status == status
        assert failed.value.to_engine_error()["status"] == status
    assert len(engine.requests) == 2


@pytest.mark.parametrize("status", [403, 404])
async def test_no_index_the_caller_may_read_passes_through(status: int) -> None:
    engine = _Engine(status)
    upstream = _upstream(engine)
    assert await upstream.tour_settings("docs", {}) is None
    assert await upstream.tour_settings("docs", {}) is None
    assert len(engine.requests) == 1


async def test_settings_credentials_replace_the_callers_for_the_lookup_only() -> None:
    engine = _Engine()
    upstream = _upstream(engine, settings_credentials="sidecar:s3cret")
    await upstream.tour_settings("docs", _basic("alice", "pw-a"))
    await upstream.tour_settings("docs", _basic("bob", "pw-b"))
    assert len(engine.requests) == 1
    assert engine.requests[0].headers["authorization"] == _basic("sidecar", "s3cret")[
        "authorization"]
    assert "s3cret" not in repr(upstream.config)


def test_identity_headers_are_the_callers_credentials_only() -> None:
    headers = {"authorization": "Basic x", "cookie": "session=1", "securitytenant": "t",
               "es-security-runas-user": "u", "content-type": "application/json", "host": "h"}
    assert identity(headers) == {"authorization": "Basic x", "cookie": "session=1",
                                 "securitytenant": "t", "es-security-runas-user": "u"}


def test_credentials_in_the_upstream_url_are_refused_without_being_echoed() -> None:
    with pytest.raises(ConfigError) as refused:
        ServerConfig(upstream="http://admin:hunter2@127.0.0.1:9200")
    assert "hunter2" not in str(refused.value) and "settings_credentials" in str(refused.value)
