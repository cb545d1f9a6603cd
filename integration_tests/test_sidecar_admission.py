"""The sidecar never blocks: pass-through answers while the model pool is saturated, and a
TOUR request that cannot get capacity before its deadline degrades or gets a 429.

Bounds are generous (correctness, not timing precision): the TOUR requests that saturate
the pool each label 200 docs with the default labeler, seconds of model time on a shared CPU.
Each test gets models of its own and no vector store: a labeler that already holds the docs'
vectors (from an earlier test, or the engine's store) would answer the holders at once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.server import BackgroundServer, Models, ServerConfig

ENGINES = ("opensearch", "elasticsearch")
QUERY = "vitamin D deficiency and bone fractures"
HOLDERS = 3  # long TOUR requests that keep the one refinement slot and the one worker busy
HOLD_MS = 5_000  # ... until their own deadline, when they answer round 0 and let go
SETTLE_S = 1.0  # lets the holders reach the pool before the probe is sent


_FRESH = itertools.count()


def _long(n: int, timeout_ms: int = HOLD_MS) -> dict:
    """A rerank of 200 docs: no early stop, so its model time does not depend on the scores
    (seconds on two cores); each text differs, so no labeler cache saves it work."""
    # unique per call: the shared models' label cache would answer a repeat at once
    return {"query": {"match": {"text": f"{QUERY} {n} {next(_FRESH)}"}}, "size": 3,
            "ext": {"tour": {"method": "rerank", "k": 200, "timeout_ms": timeout_ms}}}


def _short(timeout_ms: int) -> dict:
    return {"query": {"match": {"text": QUERY}}, "size": 3,
            "ext": {"tour": {"method": "rerank", "k": 50, "timeout_ms": timeout_ms}}}


def _post(url: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/scifact/_search", json=body, timeout=300)


@contextmanager
def _saturated(url: str, sidecar_models: Models, holding: int = HOLDERS,
               **options: object) -> Iterator[tuple[str, list[Future]]]:
    """A sidecar with one worker and one refinement slot, `holding` long TOUR requests in
    flight."""
    config = ServerConfig(upstream=url, model_threads=1, max_refinements=1, label_batch=8,
                          max_k=200, vector_store=False, **options)  # type: ignore[arg-type]
    with BackgroundServer(config, sidecar_models) as server, \
            ThreadPoolExecutor(HOLDERS) as clients:
        holders = [clients.submit(_post, server.url, _long(n)) for n in range(holding)]
        time.sleep(SETTLE_S)
        yield server.url, holders
        assert all(h.result().status_code == 200 for h in holders)


@pytest.fixture
def sidecar_models() -> Models:
    """Models whose labeler has embedded no doc yet."""
    models = Models("retriever")
    models.preload("default")
    return models


@pytest.fixture(params=ENGINES)
def upstream(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
             scifact_index: str) -> str:
    return nodes[request.param].url


def test_pass_through_answers_while_the_model_pool_is_saturated(upstream: str,
        sidecar_models: Models) -> None:
    with _saturated(upstream, sidecar_models) as (sidecar, holders):
        started = time.monotonic()
        health = httpx.get(f"{sidecar}/_cluster/health", timeout=60)
        took = time.monotonic() - started
        busy = sum(not h.done() for h in holders)
        assert health.status_code == 200 and "status" in health.json()
        assert busy >= 1, "the TOUR requests finished before the probe: the pool was not busy"
        assert took < 2.0, f"pass-through waited {took:.2f}s behind the models"


def test_a_tour_request_queued_past_its_deadline_answers_round_0_degraded(upstream: str,
        sidecar_models: Models) -> None:
    with _saturated(upstream, sidecar_models, when_full="queue") as (sidecar, holders):
        started = time.monotonic()
        response = _post(sidecar, _short(300))
        took = time.monotonic() - started
        assert not all(h.done() for h in holders)
    assert response.status_code == 200, response.text
    tour = response.json()["ext"]["tour"]
    assert tour["degraded"] is True and tour["fallback"] == "knn" and tour["method"] == "rerank"
    assert len(response.json()["hits"]["hits"]) == 3
    assert took < 0.3 + 3.0, f"a 300 ms deadline took {took:.2f}s"


def test_with_when_full_reject_a_tour_request_gets_429_with_retry_after(upstream: str,
        sidecar_models: Models) -> None:
    # one holder: a second would itself be refused
    with _saturated(upstream, sidecar_models, 1, when_full="reject",
                    retry_after_s=2) as (sidecar, _):
        response = _post(sidecar, _short(60_000))
    assert response.status_code == 429 and response.headers["retry-after"] == "2"
    payload = response.json()
    assert payload["status"] == 429
    assert payload["error"]["type"] == "es_rejected_execution_exception"


def test_the_deadline_covers_model_time(upstream: str,
        sidecar_models: Models) -> None:
    """Alone on the server, a refinement with far more model work than its deadline stops
    after the labeler batch that is running (2 docs here) and answers round 0."""
    config = ServerConfig(upstream=upstream, model_threads=1, label_batch=2, max_k=200,
                          vector_store=False)
    with BackgroundServer(config, sidecar_models) as server:
        started = time.monotonic()
        response = _post(server.url, _long(99, timeout_ms=200))
        took = time.monotonic() - started
    assert response.status_code == 200 and response.json()["ext"]["tour"]["degraded"] is True
    assert took < 0.2 + 5.0, f"a 200 ms deadline took {took:.2f}s"


def test_with_when_full_reject_a_burst_gets_one_slot_and_429s(upstream: str,
        sidecar_models: Models) -> None:
    """Requests that arrive together cannot all see the one slot free: one refines, the
    rest are refused at once rather than queued."""
    config = ServerConfig(upstream=upstream, model_threads=1, max_refinements=1,
                          when_full="reject", max_k=200, vector_store=False)
    with BackgroundServer(config, sidecar_models) as server, ThreadPoolExecutor(6) as clients:
        answers = list(clients.map(lambda n: _post(server.url, _long(n)), range(6)))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200, 429, 429, 429, 429, 429], statuses
