"""The sidecar under load and faults, against real OpenSearch nodes: a load run, an engine
killed and restarted, an interrupted ingest, a cluster node killed. Smaller and shorter
than `make bench-reliability` (es_tour/bench/reliability.py), whose code it runs.

Extra nodes sit beside the test node: base + 5 (killed), base + 20 and + 21 (a cluster,
transport ports base + 40 and + 41).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from es_tour.bench.reliability import (
    copy_docs,
    engine_kill,
    interrupted_ingest,
    load_with_probe,
    node_kill,
)
from es_tour.cluster import LocalCluster, LocalNode
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.ingest import ingest
from es_tour.server import BackgroundServer, Models, ServerConfig
from es_tour.server._rounds import FALLBACK_TIMEOUT_MS
from integration_tests.conftest import (
    PLUGIN_ZIPS,
    SCIFACT,
    SCIFACT_INDEX,
    TEST_PORTS,
    background_sidecar,
    remember_scifact,
)

BASE = TEST_PORTS["opensearch"]
COPY = "it-reliability"
DEADLINE_MS = 5_000
# the client's clock also counts the accept and the response's way back, on 2 cores busy
# starting a JVM: a hang would show as the client's 35 s timeout, far past this
CLIENT_SLACK_MS = 1_000


@pytest.fixture(scope="module")
async def main_node(retriever) -> AsyncIterator[LocalNode]:
    """The OpenSearch test node with SciFact (stopped after the module if started here)."""
    node = LocalNode("opensearch", BASE, heap="768m")
    started = node.pid() is None
    node.start(plugins=[PLUGIN_ZIPS["opensearch"]])
    async with connect("opensearch", node.url) as adapter:
        await ingest(adapter, BeirDataset(SCIFACT), SCIFACT_INDEX, retriever, if_missing=True,
                     show_progress=False)
    yield node
    if started:
        node.stop()


@pytest.fixture(scope="module")
async def victim(main_node: LocalNode) -> AsyncIterator[LocalNode]:
    node = LocalNode("opensearch", BASE + 5, heap="512m")
    node.start(timeout=600)
    await copy_docs(main_node.url, node.url, SCIFACT_INDEX, 200, COPY)
    yield node
    node.stop()


@pytest.fixture(scope="module")
async def cluster(main_node: LocalNode) -> AsyncIterator[LocalCluster]:
    nodes = LocalCluster("opensearch", BASE + 20, 2, heap="512m", transport_port=BASE + 40)
    nodes.start(timeout=600)
    await copy_docs(main_node.url, nodes.urls, SCIFACT_INDEX, 200, COPY)
    yield nodes
    nodes.stop()


@pytest.fixture(scope="module")
def sidecar_models(sidecar_models: Models, scifact: BeirDataset) -> Models:
    """The shared models, also holding the vectors of the docs copied to the other nodes."""
    remember_scifact(sidecar_models, scifact, COPY)
    return sidecar_models


def _sidecar(upstreams: list[str], sidecar_models: Models, **options) -> BackgroundServer:
    config = ServerConfig(upstream=",".join(upstreams), engine="opensearch", **options)
    return background_sidecar(config, sidecar_models)


async def test_load_of_every_kind_through_the_sidecar_has_zero_errors(main_node, sidecar_models):
    with _sidecar([main_node.url], sidecar_models) as sidecar:
        run = await load_with_probe(sidecar.url, SCIFACT_INDEX, clients=8, seconds=10,
                                    max_requests=2_000, idle_requests=20,
                                    direct=main_node.url)
    assert not run.errors(), run.errors()
    answered = {o.kind for o in run.outcomes if o.status == 200}
    assert answered == {"health", "search", "bm25", "knn", "tour", "agent"}
    assert run.idle_ms["health"] and run.loaded_ms["health"]
    assert run.idle_ms["health direct"] and run.loaded_ms["search direct"]


def test_an_unreachable_engine_is_a_clean_502_in_the_engine_error_shape(sidecar_models):
    nothing_there = f"http://127.0.0.1:{BASE + 9}"
    body = {"query": {"match": {"text": "vitamin D"}}, "ext": {"tour": {"method": "knn"}}}
    with _sidecar([nothing_there], sidecar_models) as sidecar:
        answers = [httpx.get(f"{sidecar.url}/_cluster/health", timeout=30),
                   httpx.post(f"{sidecar.url}/{COPY}/_search", json=body, timeout=30)]
    for answer in answers:
        assert answer.status_code == 502
        error = answer.json()
        assert error["status"] == 502 and error["error"]["type"] and error["error"]["reason"]


async def test_an_engine_killed_mid_load_gives_502s_then_answers_again(victim, sidecar_models):
    with _sidecar([victim.url], sidecar_models, deadline_ms=DEADLINE_MS) as sidecar:
        result = await engine_kill(victim, sidecar.url, COPY, clients=4, down_after_s=3,
                                   after_back_s=8, deadline_ms=DEADLINE_MS)
    down = result["down_answers"]
    failed = {status: count for status, count in down.items() if status != 200}
    assert failed and set(failed) <= {502, 503, 504}, down
    limit = DEADLINE_MS + FALLBACK_TIMEOUT_MS + CLIENT_SLACK_MS
    assert result["down_max_ms"] <= limit, result["down_max_ms"]
    assert result["answered_after"] > 0
    assert result["recovery_s"] <= 5.0, result["recovery_s"]


def test_an_interrupted_index_run_then_a_rerun_loses_and_duplicates_nothing(main_node):
    result = interrupted_ingest(SCIFACT, main_node.url, "it-reliability-ingest")
    assert 0 < result["at_kill"] < result["docs"]
    assert result["count"] == result["docs"]
    assert result["lost"] == [] and result["extra"] == [] and result["duplicated"] == 0
    httpx.delete(f"{main_node.url}/it-reliability-ingest")


async def test_a_two_node_cluster_loses_a_node_with_zero_failed_searches(cluster, sidecar_models):
    replicas = httpx.get(f"{cluster.urls[0]}/{COPY}/_settings/index.number_of_replicas",
                         params={"flat_settings": "true"}).json()
    assert replicas[COPY]["settings"]["index.number_of_replicas"] == "1"
    with _sidecar(cluster.urls, sidecar_models) as sidecar:
        result = await node_kill(cluster, sidecar.url, COPY, clients=6, seconds=14,
                                 kill_after_s=5, max_requests=5_000)
    run = result["run"]
    assert result["after_kill"] > 0
    assert not run.errors(), run.errors()
