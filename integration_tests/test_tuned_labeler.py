"""A labeler whose query tower was tuned (`es-tour train-labeler`) in the real engines,
through the sidecar: named in `index.tour.labeler`, it reads the doc vectors its base
model stored, so a refined search embeds no doc, and it ranks as its tuning taught it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.engines import connect
from es_tour.models import DualEncoderLabeler
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, store_index, warm
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.conftest import index_texts
from tests.models.test_query_tower import QUESTIONS, TAUGHT, TEXTS

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-tuned-labeler"
QUERY = QUESTIONS[0]


@pytest.fixture(scope="module")
def tuned(bones_tower: tuple[Any, Any, Path, int]) -> Path:
    """bge-small's query tower tuned on questions about bones that all call TAUGHT
    relevant (two folds, each choosing its epochs on the other's questions): the session's
    (the root conftest's `bones_tower`)."""
    _, result, out, _ = bones_tower
    assert result.chosen_epoch > 0  # a tower that moved, or the test below proves nothing
    return out


@pytest.fixture(scope="module", params=ENGINES)
async def cluster(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                  sidecar_models: Models) -> AsyncIterator[str]:
    engine, url = request.param, nodes[request.param].url
    await index_texts(engine, url, INDEX, TEXTS, sidecar_models.encoder)
    yield url
    async with connect(engine, url) as adapter:
        await adapter.delete_index(INDEX)


def _ranking(url: str) -> list[str]:
    response = httpx.post(f"{url}/{INDEX}/_search", timeout=120, json={
        "query": {"match": {"text": QUERY}}, "size": len(TEXTS),
        "ext": {"tour": {"method": "rerank", "k": len(TEXTS)}}})
    assert response.status_code == 200, response.text
    assert response.json()["ext"]["tour"]["degraded"] is False
    return [hit["_id"] for hit in response.json()["hits"]["hits"]]


def _labeler(url: str, name: str) -> None:
    httpx.put(f"{url}/{INDEX}/_settings",
              json={"index.tour.labeler": name}).raise_for_status()


async def test_the_tuned_labeler_reads_its_bases_store_and_ranks_as_tuned(
        cluster: str, tuned: Path, nodes: dict[str, NodeStatus]) -> None:
    url = cluster
    engine = next(name for name, node in nodes.items() if node.url == url)
    models = Models("retriever")
    base, mine = models.labeler("default"), models.labeler(str(tuned))
    assert isinstance(base, DualEncoderLabeler) and isinstance(mine, DualEncoderLabeler)
    assert store_index(mine) == store_index(base)
    async with connect(engine, url) as adapter:
        await adapter.delete_index(store_index(base))
        report = await warm(adapter, INDEX, base, DEFAULT_TEXT_FIELDS)  # the base's store
        assert report.written == len(TEXTS)
        await adapter.refresh(store_index(base))
    base.clear_cache()
    with BackgroundServer(ServerConfig(upstream=url, deadline_ms=120_000), models) as sidecar:
        before = _ranking(sidecar.url)
        _labeler(sidecar.url, str(tuned))  # through the sidecar: it sees the change at once
        try:
            after = _ranking(sidecar.url)
            stats: dict[str, Any] = httpx.get(f"{sidecar.url}/_tour/stats",
                                              timeout=30).json()["es_tour"]
        finally:
            _labeler(sidecar.url, "default")
    assert mine.docs_embedded == 0  # every doc vector came from the base's store
    assert stats["labeler_pairs_scored"]["by_labeler"][str(tuned)] == len(TEXTS)  # its name
    assert after.index(TAUGHT) < before.index(TAUGHT)
