"""A smoke test on the newest supported major of each engine (OpenSearch 3.x, Elasticsearch
9.x, on a JDK 21+): the node installs with the plugin built for it, the plugin refuses a bad
index.tour.* value, an es-tour index takes a few docs, and the sidecar runs TOUR over it and
on Elasticsearch over an index a plain client made with the engine's defaults.

One node at a time, beside the default test nodes: base + 15 and base + 25.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import httpx
import pytest

from es_tour.cluster import ELASTICSEARCH_CURRENT, OPENSEARCH_CURRENT, LocalNode, NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.ingest import ingest
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.conftest import PLUGIN_ZIPS, SCIFACT, TEST_PORTS

# Built by `make plugin` (-Pcurrent), each in its own folder beside the default zip.
NEWEST = {
    "opensearch": (OPENSEARCH_CURRENT, TEST_PORTS["opensearch"] + 15),
    "elasticsearch": (ELASTICSEARCH_CURRENT, TEST_PORTS["opensearch"] + 25),
}
INDEX = "it-newest"
PLAIN = "it-newest-plain"
DOCS = 40
QUERY = "vitamin D deficiency"


@pytest.fixture(scope="module", params=list(NEWEST))
def node(request: pytest.FixtureRequest) -> Iterator[NodeStatus]:
    engine = request.param
    version, port = NEWEST[engine]
    default_zip = PLUGIN_ZIPS[engine]
    plugin = default_zip.parent / f"{engine}-{version}" / default_zip.name
    local = LocalNode(engine, port, heap="768m", version=version)
    started = local.pid() is None
    status = local.start(timeout=300, plugins=[plugin])
    yield status
    if started:
        local.stop()


def test_the_newest_engine_runs_with_the_plugin_built_for_it(node: NodeStatus) -> None:
    assert node.version == NEWEST[node.engine][0]
    plugins = httpx.get(f"{node.url}/_cat/plugins?h=component,version&format=json").json()
    assert {"component": "tour-settings", "version": "0.1.0"} in plugins


def test_the_plugin_refuses_a_bad_tour_setting(node: NodeStatus) -> None:
    httpx.delete(f"{node.url}/it-newest-settings")
    response = httpx.put(f"{node.url}/it-newest-settings",
                         json={"settings": {"index.tour.k": 0}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "illegal_argument_exception"
    assert "[index.tour.k] must be >= 1" in error["reason"]


async def test_a_tour_search_through_the_sidecar(node: NodeStatus, retriever,
                                                 sidecar_models: Models) -> None:
    async with connect(node.engine, node.url) as adapter:
        report = await ingest(adapter, BeirDataset(SCIFACT), INDEX, retriever, replace=True,
                              reuse_embeddings=False, max_docs=DOCS, show_progress=False)
    assert report.indexed == DOCS
    settings = {"index": {"tour": {"enabled": True, "method": "tour-soft", "k": 5,
                                   "max_rounds": 1}}}
    assert httpx.put(f"{node.url}/{INDEX}/_settings", json=settings).status_code == 200
    config = ServerConfig(upstream=node.url, max_k=50, deadline_ms=120_000)
    with BackgroundServer(config, sidecar_models) as server:
        response = httpx.post(f"{server.url}/{INDEX}/_search", timeout=120,
                              json={"query": {"match": {"text": QUERY}}, "size": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["hits"]["hits"]) == 3
    tour = body["ext"]["tour"]
    assert tour["method"] == "tour-soft" and tour["origins"]["method"] == "index"
    assert tour["degraded"] is False and tour["rounds"] and tour["pairs_scored"] >= 1



def test_an_index_a_plain_client_made_with_the_engines_defaults_is_refined(
        node: NodeStatus, retriever, sidecar_models: Models) -> None:
    """Elasticsearch 9.x leaves dense_vector values out of `_source` by default: the sidecar
    must see that and read them from doc values, or each search reads no vector (a 400)."""
    if node.engine != "elasticsearch":
        pytest.skip("OpenSearch keeps vectors in _source by default")
    httpx.delete(f"{node.url}/{PLAIN}")
    settings = {"index": {"tour": {"enabled": True}}}
    mappings = {"properties": {"title": {"type": "text"}, "text": {"type": "text"},
                               "embedding": {"type": "dense_vector", "similarity": "cosine",
                                             "dims": retriever.dimension}}}
    response = httpx.put(f"{node.url}/{PLAIN}", json={"settings": settings,
                                                     "mappings": mappings})
    assert response.status_code == 200, response.text
    docs = list(itertools.islice(BeirDataset(SCIFACT).corpus(), DOCS))
    vectors = retriever.encode_docs([doc.contents for doc in docs])
    lines = "".join(json.dumps({"index": {"_id": doc.id}}) + "\n" + json.dumps(
        {"title": doc.title, "text": doc.text, "embedding": vector.tolist()}) + "\n"
        for doc, vector in zip(docs, vectors, strict=True))
    response = httpx.post(f"{node.url}/{PLAIN}/_bulk", params={"refresh": "true"},
                          content=lines, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200 and not response.json()["errors"]
    source = httpx.get(f"{node.url}/{PLAIN}/_doc/{docs[0].id}").json()["_source"]
    assert "embedding" not in source  # the engine's default, which this test is about
    config = ServerConfig(upstream=node.url, max_k=50, deadline_ms=120_000)
    with BackgroundServer(config, sidecar_models) as server:
        response = httpx.post(f"{server.url}/{PLAIN}/_search", timeout=120, json={
            "query": {"match": {"text": QUERY}}, "size": 3,
            "ext": {"tour": {"k": 5, "max_rounds": 1}}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["hits"]["hits"]) == 3
    tour = body["ext"]["tour"]
    assert tour["degraded"] is False and tour["fallback"] is None
    assert tour["rounds"] and tour["pairs_scored"] >= 1
