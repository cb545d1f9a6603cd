"""An ensemble labeler in the real engines, through the sidecar: `warm` fills each member's
own store, a refined search then embeds no doc, stats count per member, the plugin takes the
ensemble as `index.tour.labeler`, and the member weights decide the ranking."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.engines import ClientEngine, connect
from es_tour.models import DualEncoderLabeler, EnsembleLabeler
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, store_index, warm
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.conftest import index_texts
from tests.models.test_query_tower import QUESTIONS, TEXTS

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-ensemble"
QUERY = QUESTIONS[0]
MEMBERS = ("minilm-l6", "bge-small-en-v1.5")
ENSEMBLE = "+".join(MEMBERS)


@pytest.fixture(scope="module", params=ENGINES)
async def cluster(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                  sidecar_models: Models) -> AsyncIterator[tuple[str, str]]:
    engine, url = request.param, nodes[request.param].url
    await index_texts(engine, url, INDEX, TEXTS, sidecar_models.encoder)
    yield engine, url
    async with connect(engine, url) as adapter:
        await adapter.delete_index(INDEX)


def _search(url: str, tour: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/{INDEX}/_search", timeout=120, json={
        "query": {"match": {"text": QUERY}}, "size": len(TEXTS),
        "ext": {"tour": {"method": "rerank", "k": len(TEXTS), **tour}}})
    assert response.status_code == 200, response.text
    assert response.json()["ext"]["tour"]["degraded"] is False
    return dict(response.json())


def _ids(answer: dict[str, Any]) -> list[str]:
    return [hit["_id"] for hit in answer["hits"]["hits"]]


async def test_warm_fills_each_members_store_and_a_search_then_embeds_nothing(
        cluster: tuple[str, str], sidecar_models: Models) -> None:
    engine, url = cluster
    models = Models("retriever")
    ensemble = models.labeler(ENSEMBLE)
    assert isinstance(ensemble, EnsembleLabeler)
    members = [models.labeler(name) for name in MEMBERS]
    assert list(ensemble.members) == members  # the labelers these names load alone
    stores = [store_index(member) for member in members if isinstance(member,
                                                                      DualEncoderLabeler)]
    async with connect(engine, url) as adapter:
        for store in stores:
            await adapter.delete_index(store)
        report = await warm(adapter, INDEX, ensemble, DEFAULT_TEXT_FIELDS)
        assert report.stores == stores
        assert (report.docs, report.written, report.stored) == (len(TEXTS), 2 * len(TEXTS), 0)
        for store in stores:
            await adapter.refresh(store)
            assert await adapter.count(store) == len(TEXTS)
    ensemble.clear_cache()  # a restart: only the stores remember
    embedded = [member.docs_embedded for member in members]  # type: ignore[attr-defined]
    with BackgroundServer(ServerConfig(upstream=url, deadline_ms=120_000), models) as sidecar:
        _search(sidecar.url, {"labeler": ENSEMBLE})
        stats = httpx.get(f"{sidecar.url}/_tour/stats", timeout=30).json()["es_tour"]
    assert [member.docs_embedded for member in members] == embedded  # type: ignore[attr-defined]
    assert stats["store_docs_found"]["total"] == 2 * len(TEXTS)
    scored = stats["labeler_pairs_scored"]["by_labeler"]
    assert scored[ENSEMBLE] == len(TEXTS)  # under the name it was loaded by
    assert all(scored[name] == len(TEXTS) for name in MEMBERS)  # each member counts its own


async def test_member_weights_decide_the_ranking(
        cluster: tuple[str, str], sidecar_models: Models) -> None:
    """Weighted all but fully to one member, the ensemble ranks as that member alone; the
    two members alone rank the docs differently, so the weights are what decides."""
    _, url = cluster
    models = Models("retriever")
    with BackgroundServer(ServerConfig(upstream=url, deadline_ms=120_000), models) as sidecar:
        alone = [_ids(_search(sidecar.url, {"labeler": name})) for name in MEMBERS]
        leaning = [_ids(_search(sidecar.url, {"labeler": f"{MEMBERS[0]}^{a}+{MEMBERS[1]}^{b}"}))
                   for a, b in ((1, 0.001), (0.001, 1))]
    assert alone[0] != alone[1]
    assert leaning == alone


async def test_the_plugin_takes_an_ensemble_and_rejects_a_bad_one(
        cluster: tuple[str, str]) -> None:
    engine, url = cluster
    async with connect(engine, url) as adapter:
        await _put(adapter, {"index.tour.labeler": f"{MEMBERS[0]}^1+{MEMBERS[1]}^0.5"})
        assert (await adapter.settings(INDEX))["index.tour.labeler"] == \
            f"{MEMBERS[0]}^1+{MEMBERS[1]}^0.5"
    response = httpx.put(f"{url}/{INDEX}/_settings",
                         json={"index.tour.labeler": f"{MEMBERS[0]}^0+{MEMBERS[1]}"})
    assert response.status_code == 400
    assert "must be > 0" in response.json()["error"]["reason"]


async def _put(adapter: ClientEngine, settings: dict[str, Any]) -> None:
    with adapter.engine_errors():
        await adapter.put_settings(INDEX, settings)
