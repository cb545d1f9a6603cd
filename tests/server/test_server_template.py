"""`_search/template`: which paths are template searches, and reading the engine's render."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from es_tour.errors import ConfigError, EngineError
from es_tour.server import ServerConfig
from es_tour.server._passthrough import Passthrough
from es_tour.server._template import RENDER_PATH, rendered_body, rendered_search, template_target
from es_tour.server._upstream import Upstream


def test_template_target_names_the_index_of_a_template_search_only() -> None:
    assert template_target("POST", "/scifact/_search/template") == "scifact"
    assert template_target("GET", "/scifact/_search/template/") == "scifact"
    assert template_target("GET", "/_search/template") == ""  # no index: passed through
    assert template_target("POST", "/sci%66act/_search/template") == "scifact"
    assert template_target("POST", "/scifact/_search") is None
    assert template_target("POST", "/_render/template") is None
    assert template_target("POST", "/scifact/_doc/template") is None
    assert template_target("PUT", "/scifact/_search/template") is None


def test_the_rendered_body_is_the_template_output() -> None:
    body = {"query": {"match": {"text": "stem cells"}}, "size": 3}
    assert rendered_body(200, {"template_output": body}) == body


def test_a_refused_template_is_the_engines_error_with_its_status() -> None:
    refusal = {"error": {"type": "resource_not_found_exception", "reason": "no [t]"},
               "status": 404}
    with pytest.raises(EngineError) as caught:
        rendered_body(404, refusal)
    assert caught.value.status == 404 and caught.value.to_engine_error() == refusal


@pytest.mark.parametrize("status, answer, reason", [
    (400, {"error": "no handler found for uri [/_render/template] and method [POST]"},
     "the engine serves no search templates"),
    (403, {"error": {"type": "security_exception", "reason": "no permissions"}, "status": 403},
     "the caller may not render templates"),
])
def test_what_only_the_engine_can_answer_passes_through(status: int, answer: object,
                                                        reason: str) -> None:
    with pytest.raises(Passthrough, match=reason):
        rendered_body(status, answer)


def test_a_render_that_is_no_search_body_is_a_400() -> None:
    with pytest.raises(ConfigError):
        rendered_body(200, {"template_output": [1, 2]})


class _RenderEngine:
    """POST /_render/template on loopback: records each request, and renders `{{q}}` in a
    match query as the engine would for the tests' template."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], object]] = []

    async def render(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(({k.lower(): v for k, v in request.headers.items()}, body))
        q = body.get("params", {}).get("q", "")
        return web.json_response({"template_output": {"query": {"match": {"text": q}}}})


@asynccontextmanager
async def _upstream(engine: _RenderEngine) -> AsyncIterator[Upstream]:
    app = web.Application()
    app.router.add_post(RENDER_PATH, engine.render)
    async with TestServer(app, host="127.0.0.1") as server:
        upstream = Upstream(ServerConfig(upstream=f"http://127.0.0.1:{server.port}",
                                         engine="opensearch"))
        try:
            yield upstream
        finally:
            await upstream.close()


@pytest.mark.parametrize("option", ["explain", "profile"])
async def test_unhonoured_options_pass_through_before_any_engine_call(option: str) -> None:
    engine = _RenderEngine()
    async with _upstream(engine) as upstream:
        with pytest.raises(Passthrough, match=option):
            await rendered_search(upstream, {"id": "t", option: True}, {})
        assert engine.requests == []
        await rendered_search(upstream, {"id": "t", option: False}, {})  # the default
    assert len(engine.requests) == 1


async def test_the_template_is_rendered_as_the_caller() -> None:
    engine = _RenderEngine()
    body = {"source": {"query": {"match": {"text": "{{q}}"}}}, "params": {"q": "x"}}
    async with _upstream(engine) as upstream:
        rendered = await rendered_search(
            upstream, body, {"authorization": "Basic YTpi", "x-other": "kept back"})
    assert rendered == {"query": {"match": {"text": "x"}}}
    ((headers, sent),) = engine.requests
    assert headers.get("authorization") == "Basic YTpi" and "x-other" not in headers
    assert headers.get("content-type") == "application/json" and sent == body
