"""The labeler vector store in the real engines: φ identical whether a doc's vector was
embedded here or read from the store, shared by two sidecars at once, kept across a
restart, and filled ahead of the searches by `es-tour warm`, which resumes where it was
stopped. The store's access rules are checked on the
secured OpenSearch in test_security.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from es_tour.cli import app
from es_tour.cluster import NodeStatus
from es_tour.engines import ClientEngine, connect
from es_tour.models import DualEncoderLabeler, doc_key
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, VectorStore, store_index, warm
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.conftest import index_texts

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-vector-store"
QUERY = "vitamin D deficiency"
TEXTS = [f"{topic} study number {n}" for n in range(5) for topic in (
    "vitamin D deficiency and bone health", "sleep and memory consolidation",
    "statins and heart disease", "gut bacteria and immunity")]
K = 8  # docs the refined search labels: small, the labeler runs on a shared CPU
REFINE = {"method": "rerank", "k": K}


@dataclass
class Cluster:
    engine: str
    url: str
    store: str  # the default labeler's store index


@pytest.fixture(scope="module", params=ENGINES)
async def cluster(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                  sidecar_models: Models) -> AsyncIterator[Cluster]:
    """A small index, and the default labeler's store emptied."""
    engine, url = request.param, nodes[request.param].url
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    await index_texts(engine, url, INDEX, TEXTS, sidecar_models.encoder)
    async with connect(engine, url) as adapter:
        await adapter.delete_index(store_index(labeler))
    yield Cluster(engine, url, store_index(labeler))


@pytest.fixture
async def adapter(cluster: Cluster) -> AsyncIterator[ClientEngine]:
    async with connect(cluster.engine, cluster.url) as engine:
        yield engine


def _fresh(labeler: DualEncoderLabeler) -> DualEncoderLabeler:
    """The same model with nothing in memory: a new process, to the store."""
    return DualEncoderLabeler(labeler.encoder, labeler.name)


async def test_phi_read_from_the_store_is_identical_to_phi_embedded_here(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    docs = [(str(i), text) for i, text in enumerate(TEXTS)]
    first, store = _fresh(labeler), VectorStore(adapter)
    lacked = await store.fill(first, INDEX, docs)  # no store index yet: a miss, not a failure
    assert [(member, len(keys)) for member, keys in lacked] == [(first, len(docs))]
    assert store.counts.failures == 0
    embedded = first.score(QUERY, docs, INDEX)
    store.keep(lacked)
    await store.flush()
    await adapter.refresh(cluster.store)
    assert store.counts.written == len(docs) and store.counts.failures == 0

    second = _fresh(labeler)
    assert await VectorStore(adapter).fill(second, INDEX, docs) == [(second, [])]
    read = second.score(QUERY, docs, INDEX)
    assert second.docs_embedded == 0 and first.docs_embedded == len(docs)
    np.testing.assert_array_equal(read, embedded)
    # another index's doc of the same id and text is another key: never read as this one's
    [(_, lacked_there)] = await VectorStore(adapter).fill(_fresh(labeler), "other-index", docs)
    assert len(lacked_there) == len(docs)


async def _read_ahead(store: VectorStore, labeler: DualEncoderLabeler,
                      docs: list[tuple[str, str]], expected: int) -> None:
    """The index's first search (one doc) starts the read ahead; wait for it to end."""
    await store.fill(labeler, INDEX, docs[:1])
    for _ in range(200):
        if store.counts.preloaded >= expected:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"read {store.counts.preloaded} of {expected} records ahead")


async def _store_every_doc(cluster: Cluster, adapter: ClientEngine,
                           labeler: DualEncoderLabeler) -> tuple[list[tuple[str, str]], np.ndarray]:
    """An emptied store then filled with every doc of TEXTS; the docs, and the φ of QUERY
    their embedding gave."""
    await adapter.delete_index(cluster.store)
    docs = [(str(i), text) for i, text in enumerate(TEXTS)]
    writer, embedder = VectorStore(adapter), _fresh(labeler)
    lacked = await writer.fill(embedder, INDEX, docs)
    expected = embedder.score(QUERY, docs, INDEX)
    writer.keep(lacked)
    await writer.flush()
    await adapter.refresh(cluster.store)
    return docs, expected


async def test_a_store_read_ahead_serves_the_same_text_without_a_search_and_no_other(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    docs, expected = await _store_every_doc(cluster, adapter, labeler)

    store, reader = VectorStore(adapter, preload_docs=100), _fresh(labeler)
    await _read_ahead(store, reader, docs, len(docs))
    assert store.counts.reads == 1 and store.counts.preloaded == len(docs)
    # what was read ahead is used with no store search, and gives the same φ
    assert await store.fill(reader, INDEX, docs[1:]) == [(reader, [])]
    assert store.counts.reads == 1 and reader.docs_embedded == 0
    np.testing.assert_array_equal(reader.score(QUERY, docs, INDEX), expected)
    # a caller shown another text of a doc gets nothing read ahead for it
    other, stranger = [(docs[1][0], docs[1][1] + " as another caller sees it")], _fresh(labeler)
    assert await store.fill(stranger, INDEX, other) == [(stranger, [doc_key(INDEX, *other[0])])]
    await store.close()

    bounded = VectorStore(adapter, preload_docs=3)
    await _read_ahead(bounded, _fresh(labeler), docs, 3)
    await asyncio.sleep(0.2)
    assert bounded.counts.preloaded == 3
    await bounded.close()


async def test_a_store_is_read_ahead_past_its_result_window_page_by_page(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    """A corpus larger than the store's `index.max_result_window` (10,000 by default) is
    read ahead whole: each page follows the last one's sort values, never a `from`."""
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    # a search cut before its labeler ran, with no store made yet: nothing to write, no error
    await adapter.delete_index(cluster.store)
    writer, docs = VectorStore(adapter), [(str(i), text) for i, text in enumerate(TEXTS)]
    writer.keep(await writer.fill(_fresh(labeler), INDEX, docs))
    await writer.flush()
    assert writer.counts.written == 0 and writer.counts.failures == 0
    await _store_every_doc(cluster, adapter, labeler)
    window = 5  # pages of 3 pass it at the second page's end
    await adapter.put_settings(cluster.store, {"index.max_result_window": window})
    try:
        store, reader = VectorStore(adapter, preload_docs=100, preload_batch=3), _fresh(labeler)
        await _read_ahead(store, reader, docs, len(docs))
        assert store.counts.preloaded == len(docs) > window and store.counts.failures == 0
        # every record was read ahead: the rest of the docs ask the store nothing
        assert await store.fill(reader, INDEX, docs[1:]) == [(reader, [])]
        assert store.counts.reads == 1 and reader.docs_embedded == 0
        await store.close()
    finally:
        await adapter.put_settings(cluster.store, {"index.max_result_window": 10_000})


def _refined(url: str) -> dict[str, Any]:
    response = httpx.post(f"{url}/{INDEX}/_search", timeout=120, json={
        "query": {"match": {"text": QUERY}}, "size": 3, "ext": {"tour": REFINE}})
    assert response.status_code == 200, response.text
    assert response.json()["ext"]["tour"]["degraded"] is False
    return dict(response.json())


def _stats(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/_tour/stats", timeout=30)
    assert response.status_code == 200
    return dict(response.json()["es_tour"])


def _written(url: str, at_least: int) -> None:
    """Wait for the sidecar's writer (it flushes every second) to store `at_least` vectors."""
    for _ in range(100):
        if _stats(url)["store_docs_written"]["total"] >= at_least:
            return
        time.sleep(0.1)
    raise AssertionError(f"the sidecar wrote fewer than {at_least} vectors: {_stats(url)}")


def _config(cluster: Cluster) -> ServerConfig:
    return ServerConfig(upstream=cluster.url, deadline_ms=120_000)


@pytest.fixture
def second_models() -> Iterator[Models]:
    """Another sidecar's own models: nothing it embeds is shared in memory."""
    models = Models("retriever")
    models.preload("default")
    yield models


async def test_a_second_sidecar_reuses_the_vectors_the_first_one_stored(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models,
        second_models: Models) -> None:
    await adapter.delete_index(cluster.store)
    sidecar_models.labeler("default").clear_cache()  # type: ignore[attr-defined]
    with BackgroundServer(_config(cluster), sidecar_models) as first, \
            BackgroundServer(_config(cluster), second_models) as second:
        one = _refined(first.url)
        _written(first.url, K)
        await adapter.refresh(cluster.store)
        two = _refined(second.url)
        stats = _stats(second.url)
    assert stats["store_docs_found"]["total"] >= K
    assert stats["labeler_docs_embedded"]["total"] == 0  # every doc came from the store
    assert stats["vector_store"]["hit_rate"] == 1.0
    assert [h["_id"] for h in two["hits"]["hits"]] == [h["_id"] for h in one["hits"]["hits"]]


async def test_a_restarted_sidecar_keeps_the_store(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    await adapter.delete_index(cluster.store)
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    labeler.clear_cache()
    with BackgroundServer(_config(cluster), sidecar_models) as first:
        _refined(first.url)
    # stopped at once: the vectors still queued were written as it shut down
    await adapter.refresh(cluster.store)
    assert await adapter.count(cluster.store) >= K
    labeler.clear_cache()  # a restart forgets everything in memory
    before = labeler.docs_embedded
    with BackgroundServer(_config(cluster), sidecar_models) as restarted:
        _refined(restarted.url)
        stats = _stats(restarted.url)
    assert labeler.docs_embedded == before
    assert stats["store_docs_found"]["total"] >= K and stats["store_failures"]["total"] == 0


class Interrupted(Exception):
    """Ctrl-C, as the warm loop sees it."""


async def test_warm_resumes_after_an_interruption_and_then_no_search_embeds(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    await adapter.delete_index(cluster.store)
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)

    def interrupt(_: int) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):  # stopped after its first batch of 8 was stored
        await warm(adapter, INDEX, _fresh(labeler), DEFAULT_TEXT_FIELDS, batch=8,
                   on_batch=interrupt)
    await adapter.refresh(cluster.store)
    resumed = _fresh(labeler)
    report = await warm(adapter, INDEX, resumed, DEFAULT_TEXT_FIELDS, batch=8)
    assert (report.docs, report.stored, report.written) == (len(TEXTS), 8, len(TEXTS) - 8)
    assert resumed.docs_embedded == len(TEXTS) - 8
    await adapter.refresh(cluster.store)

    done = await asyncio.to_thread(CliRunner().invoke, app, [  # a loop of its own
        "warm", "--index", INDEX, "--engine", cluster.engine, "--url", cluster.url])
    assert done.exit_code == 0, done.output
    assert f"0 vectors stored, {len(TEXTS)} already stored" in " ".join(done.output.split())

    labeler.clear_cache()
    before = labeler.docs_embedded
    with BackgroundServer(_config(cluster), sidecar_models) as sidecar:
        _refined(sidecar.url)
    assert labeler.docs_embedded == before


async def test_warming_an_alias_warms_the_index_behind_it(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    """Records name the concrete index that holds a doc: what `warm` stores through an
    alias is what a warm (or a search) of the index reads."""
    await adapter.delete_index(cluster.store)
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    alias = f"{INDEX}-alias"
    async with httpx.AsyncClient() as http:
        added = await http.post(f"{cluster.url}/_aliases", json={
            "actions": [{"add": {"index": INDEX, "alias": alias}}]})
        assert added.status_code == 200, added.text
        try:
            through_alias = await warm(adapter, alias, _fresh(labeler), DEFAULT_TEXT_FIELDS)
            assert (through_alias.stored, through_alias.written) == (0, len(TEXTS))
            await adapter.refresh(cluster.store)
            direct = await warm(adapter, INDEX, _fresh(labeler), DEFAULT_TEXT_FIELDS)
            assert (direct.stored, direct.written) == (len(TEXTS), 0)
        finally:
            await http.post(f"{cluster.url}/_aliases", json={
                "actions": [{"remove": {"index": INDEX, "alias": alias}}]})


async def _store_shards(adapter: ClientEngine, store: str) -> str:
    return str((await adapter.settings(store))["index.number_of_shards"])


async def test_the_store_takes_its_source_indexs_shards_unless_the_index_sets_its_own(
        cluster: Cluster, adapter: ClientEngine, sidecar_models: Models) -> None:
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    source = f"{INDEX}-two-shards"
    async with httpx.AsyncClient() as http:
        await http.delete(f"{cluster.url}/{source}")
        made = await http.put(f"{cluster.url}/{source}", json={
            "settings": {"number_of_shards": 2, "number_of_replicas": 0}})
        assert made.status_code == 200, made.text
        for i, text in enumerate(TEXTS[:4]):
            await http.put(f"{cluster.url}/{source}/_doc/{i}", json={"title": "", "text": text})
        await adapter.refresh(source)
        try:
            await adapter.delete_index(cluster.store)
            await warm(adapter, source, _fresh(labeler), DEFAULT_TEXT_FIELDS)
            assert await _store_shards(adapter, cluster.store) == "2"

            await adapter.delete_index(cluster.store)
            await adapter.put_settings(source, {"index.tour.vector_store_shards": 3})
            await warm(adapter, source, _fresh(labeler), DEFAULT_TEXT_FIELDS)
            assert await _store_shards(adapter, cluster.store) == "3"
        finally:
            await adapter.delete_index(cluster.store)
            await http.delete(f"{cluster.url}/{source}")
