"""The sidecar's own operator endpoints in front of the real engines: health, stats and
metrics counting a refined, a passed-through and a degraded search, the degraded header,
and the access log."""

from __future__ import annotations

import collections
import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from es_tour.cluster import NodeStatus
from es_tour.server import (
    DEGRADED_HEADER,
    PASSTHROUGH_HEADER,
    BackgroundServer,
    Models,
    ServerConfig,
)
from integration_tests.conftest import SMALL_REFINE, TOPIC_TEXTS, index_texts
from tests.test_compose import HEALTH_PATH, dockerfile_health

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-sidecar-ops"
QUERY = "vitamin D deficiency"


@dataclass
class Ops:
    engine: str
    url: str  # the sidecar
    direct: str  # the engine itself


@pytest.fixture(scope="module", params=ENGINES)
async def ops(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
              sidecar_models: Models) -> Any:
    engine, url = request.param, nodes[request.param].url
    await index_texts(engine, url, INDEX, TOPIC_TEXTS, sidecar_models.encoder)
    # a generous deadline: the refined search must not degrade on a busy CPU; no kept
    # rankings, which would answer the degraded searches' search from the refined one's
    config = ServerConfig(upstream=url, deadline_ms=120_000, access_log=True,
                          ranking_cache_ttl_s=0)
    with BackgroundServer(config, sidecar_models) as server:
        yield Ops(engine, server.url, url)


def _search(url: str, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(f"{url}/{INDEX}/_search", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response


def _metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/_tour/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples}


def test_stats_and_metrics_count_a_refined_a_passed_through_and_a_degraded_search(
        ops: Ops, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="es_tour.server.access")
    refined = _search(ops.url, {"query": {"match": {"text": QUERY}}, "size": 3,
                                "ext": {"tour": SMALL_REFINE}})
    passed = _search(ops.url, {"query": {"match": {"text": QUERY}}, "size": 3})
    degraded = _search(ops.url, {"query": {"match": {"text": QUERY}}, "size": 3,
                                 "ext": {"tour": {**SMALL_REFINE, "timeout_ms": 1}}})

    assert DEGRADED_HEADER not in refined.headers and DEGRADED_HEADER not in passed.headers
    assert passed.headers[PASSTHROUGH_HEADER] == "index.tour.enabled is not true"
    assert degraded.headers[DEGRADED_HEADER] == "deadline"
    assert degraded.json()["ext"]["tour"]["degraded"] is True

    stats = httpx.get(f"{ops.url}/_tour/stats", timeout=30)
    assert stats.status_code == 200
    counts = stats.json()["es_tour"]
    assert counts["refined"]["by_method"] == {"rerank": 1.0}
    assert counts["degraded"]["by_method"] == {"rerank": 1.0}
    assert counts["passed_through"]["by_reason"] == {"index.tour.enabled is not true": 1.0}
    assert counts["search_duration_seconds"]["by_method"]["rerank"]["count"] == 2.0
    assert counts["pairs_labelled"]["by_method"]["rerank"] >= 5
    searched = sum(r.json()["ext"]["tour"]["engine_calls"] for r in (refined, degraded))
    assert searched >= 2
    assert counts["engine_searches"]["by_method"] == {"rerank": searched}
    # the engine waits the traces give, in seconds
    waited = sum(r.json()["ext"]["tour"]["timings"]["engine_ms"] for r in (refined, degraded))
    assert waited > 0
    assert counts["engine_seconds"]["by_method"]["rerank"] == pytest.approx(waited / 1000,
                                                                             abs=1e-5)
    # each answer's page, counted by where its trace says it came from
    pages = collections.Counter(r.json()["ext"]["tour"]["page"] for r in (refined, degraded))
    assert counts["pages"]["by_came_from"] == {name: float(n) for name, n in pages.items()}
    assert counts["queue_depth"] == 0.0 and counts["rejected"]["total"] == 0.0
    assert 0.0 <= counts["label_cache"]["hit_rate"] <= 1.0  # pairs were labelled
    assert QUERY not in stats.text

    samples = _metrics(ops.url)
    assert samples[("es_tour_refined_total", (("method", "rerank"),))] == 1.0
    assert samples[("es_tour_degraded_total", (("method", "rerank"),))] == 1.0
    assert samples[("es_tour_passed_through_total",
                    (("reason", "index.tour.enabled is not true"),))] == 1.0
    assert samples[("es_tour_search_duration_seconds_count", (("method", "rerank"),))] == 2.0

    lines = [r.getMessage() for r in caplog.records if r.name == "es_tour.server.access"]
    searches = [line for line in lines if line.startswith(f"POST /{INDEX}/_search 200 ")]
    assert [line.rsplit("ms ", 1)[1] for line in searches] == [
        "refined", "passthrough: index.tour.enabled is not true", "degraded: deadline"]
    assert not any(QUERY in line for line in lines)


def test_an_msearch_names_its_degraded_items_in_the_header(ops: Ops) -> None:
    lines = [{"index": INDEX}, {"query": {"match": {"text": QUERY}}, "size": 3},
             {"index": INDEX}, {"query": {"match": {"text": QUERY}}, "size": 3,
                                "ext": {"tour": {**SMALL_REFINE, "timeout_ms": 1}}}]
    response = httpx.post(f"{ops.url}/_msearch", content="".join(
        json.dumps(line) + "\n" for line in lines), timeout=120,
        headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    assert response.headers[DEGRADED_HEADER] == "[1] deadline"
    assert response.json()["responses"][1]["ext"]["tour"]["degraded"] is True


def test_health_answers_200_with_the_engine_up(ops: Ops) -> None:
    response = httpx.get(f"{ops.url}/_tour/health", timeout=30)
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "serving" and health["engine"] == ops.engine
    # the engine's own answer to `GET /` (this Elasticsearch test node answers it 405)
    assert health["upstream"] == {"reachable": True,
                                  "status": httpx.get(f"{ops.direct}/").status_code}
    assert health["models"]["encoder"]["loaded"] is True
    assert "default" in health["models"]["labelers"]


def test_the_playground_is_off_by_default_and_its_paths_are_the_engines(ops: Ops) -> None:
    # `es-tour serve` serves it only with --playground: its paths then answer as the engine
    # answers any path it does not know
    for path in ("/_tour/playground", "/_tour/playground/playground.js",
                 "/_tour/playground/defaults"):
        through = httpx.get(f"{ops.url}{path}", timeout=30)
        direct = httpx.get(f"{ops.direct}{path}", timeout=30)
        assert through.status_code == direct.status_code >= 400, path
        assert through.text == direct.text, path


def test_an_unsupported_method_on_an_endpoint_of_the_sidecar_is_a_405_in_the_engine_shape(
        ops: Ops) -> None:
    response = httpx.post(f"{ops.url}/_tour/health", timeout=30)
    assert response.status_code == 405
    assert response.json()["error"]["type"] == "method_not_allowed_exception"


@pytest.fixture
def closed_port() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


def test_health_answers_503_when_the_upstream_is_unreachable(
        closed_port: str, sidecar_models: Models) -> None:
    with BackgroundServer(ServerConfig(upstream=closed_port), sidecar_models) as server:
        response = httpx.get(f"{server.url}/_tour/health", timeout=30)
    assert response.status_code == 503
    health = response.json()
    assert health["status"] == "upstream_unavailable"
    assert health["upstream"] == {"reachable": False, "status": None}


def _image_health_check(sidecar: str) -> int:
    """Exit status of the Dockerfile's HEALTHCHECK command, pointed at `sidecar` (the
    image's own listen address is the one thing replaced)."""
    _, command = dockerfile_health()
    code = command[2].replace(f"http://127.0.0.1:9201{HEALTH_PATH}", f"{sidecar}{HEALTH_PATH}")
    assert sidecar in code
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          timeout=30).returncode


def test_the_images_health_check_passes_only_while_the_sidecar_and_its_engine_answer(
        ops: Ops, closed_port: str, sidecar_models: Models) -> None:
    assert _image_health_check(ops.url) == 0
    assert _image_health_check(closed_port) == 1  # no sidecar
    with BackgroundServer(ServerConfig(upstream=closed_port), sidecar_models) as server:
        assert _image_health_check(server.url) == 1  # a sidecar without its engine
