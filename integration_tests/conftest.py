"""Real engines for the integration tests, started through the same code path as the CLI."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from es_tour.cluster import LocalNode, NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine, IndexSpec, connect
from es_tour.models import DualEncoder
from es_tour.server import BackgroundServer, Models, ServerConfig

SCIFACT = Path(
    os.environ.get("ES_TOUR_DATASETS", Path(__file__).parents[2] / "shared" / "datasets")
)
SCIFACT = SCIFACT / "scifact"
# Test ports, apart from the defaults, so a developer's own nodes are left alone;
# ES_TOUR_TEST_PORT_BASE moves both (base, base + 10) so parallel checkouts don't share nodes.
_PORT_BASE = int(os.environ.get("ES_TOUR_TEST_PORT_BASE", "9250"))
TEST_PORTS = {"opensearch": _PORT_BASE, "elasticsearch": _PORT_BASE + 10}
# Built by `make plugin`, which `make test` runs first.
PLUGIN_ZIPS = {
    "opensearch": Path(__file__).parents[1] / "plugin/target/tour-settings-0.1.0.zip",
    "elasticsearch": Path(__file__).parents[1] / "plugin/target/tour-settings-es-0.1.0.zip",
}
ENGINES = tuple(TEST_PORTS)
# The sidecar, security and reliability suites serve OpenSearch through a sidecar of two
# worker processes, as `es-tour serve` runs on two cores, and Elasticsearch through one
# on a thread sharing the session's models: each test runs once per engine, and both ways
# of serving are tested. ES_TOUR_TEST_WORKERS=N serves every engine through N.
_FORCED_WORKERS = os.environ.get("ES_TOUR_TEST_WORKERS")
ENGINE_WORKERS = {"opensearch": 2, "elasticsearch": 1}


def sidecar_workers(engine: str) -> int:
    """The worker processes a suite's sidecar in front of `engine` runs."""
    return int(_FORCED_WORKERS) if _FORCED_WORKERS else ENGINE_WORKERS[engine]


def background_sidecar(config: ServerConfig, models: Models | None = None,
                       engine: str = "opensearch") -> BackgroundServer:
    """The suite's sidecar in front of `engine`: on a thread with the module's `models`
    where it runs one worker, else processes that each load their own."""
    workers = sidecar_workers(engine)
    if workers > 1:
        return BackgroundServer(replace(config, workers=workers))
    return BackgroundServer(config, models)


@pytest.fixture(scope="session")
def scifact() -> BeirDataset:
    return BeirDataset(SCIFACT)


@pytest.fixture(scope="session")
def start_node() -> Iterator[Callable[[str], NodeStatus]]:
    """Starts an engine's test node on first use, once per session (a module that needs one
    engine starts only that one); stops only the nodes this session started."""
    started: list[LocalNode] = []
    statuses: dict[str, NodeStatus] = {}

    def start(engine: str) -> NodeStatus:
        if engine not in statuses:
            node = LocalNode(engine, TEST_PORTS[engine], heap="768m")
            if node.pid() is None:
                started.append(node)
            statuses[engine] = node.start(plugins=[PLUGIN_ZIPS[engine]])
        return statuses[engine]

    yield start
    for node in started:
        node.stop()


@pytest.fixture(scope="session")
def nodes(start_node: Callable[[str], NodeStatus]) -> dict[str, NodeStatus]:
    """Both engines' test nodes."""
    return {engine: start_node(engine) for engine in ENGINES}


@pytest.fixture(params=ENGINES)
async def engine(
    request: pytest.FixtureRequest, nodes: dict[str, NodeStatus]
) -> AsyncIterator[ClientEngine]:
    async with connect(request.param, nodes[request.param].url) as adapter:
        yield adapter


# The suite's own learned-agent policy, by registry name (a request names a policy, never
# a path); the default policy, or any other `es-tour train-agent` left in the model cache,
# is never read, so what a machine's cache holds changes no result.
LEARNED_POLICY = f"it-acting-{os.getpid()}"


@pytest.fixture(scope="session")
def learned_policy() -> Iterator[str]:
    """LEARNED_POLICY in the registry for the session: trees fitted on made-up trials, which
    weigh every kind of candidate (`term^0.5`, `+term`, ...), at threshold 0, so that it acts
    in every round it has a candidate (an agent that refines is the one whose query could
    show what it may not). Sidecar worker processes read it from the same registry."""
    import numpy as np

    from es_tour.agents import FEATURES, TreePolicy, fit_trees, policy_dir

    trials = np.random.default_rng(13).random((200, len(FEATURES)))
    trees = fit_trees(trials, (trials[:, 0] + trials[:, 1] > 1.0).astype(int))
    directory = policy_dir(LEARNED_POLICY)
    TreePolicy(trees, threshold=0.0).save(directory, {"training": {"made_by": "conftest"}})
    yield LEARNED_POLICY
    shutil.rmtree(directory, ignore_errors=True)


SCIFACT_INDEX = "scifact"
# queries a quality run (latency not under test) searches at once: the engine's calls
# overlap the client's work on two cores
QUALITY_CONCURRENCY = 4


@pytest.fixture(scope="session")
def retriever():
    """The retriever as the sidecar and `es-tour index` open it (its registry precisions):
    one SciFact corpus embedding in the model cache serves the suite's indices and the
    CLI's alike, where a cold cache would embed it once more at another precision."""
    from es_tour.models import query_encoder

    return query_encoder("retriever")


@pytest.fixture(scope="session")
def corpus_labeler(scifact):
    """The default labeler (bge-small) over SciFact's corpus vectors, which its model cache
    keeps after the first run: each pair is a row lookup, with the φ of query time."""
    from es_tour.agents import CorpusLabeler
    from es_tour.models import labeler_encoder
    from onnx_models import spec

    return CorpusLabeler(labeler_encoder("default"), scifact, spec("default").name)


@pytest.fixture(scope="module")
def sidecar_models(scifact):
    """A sidecar's models with the default labeler loaded, shared by one module's servers;
    it holds SciFact's doc vectors for the shared index (see `remember_scifact`)."""
    shared = Models("retriever")
    shared.preload("default")
    remember_scifact(shared, scifact, SCIFACT_INDEX)
    return shared


def remember_scifact(models, scifact: BeirDataset, *indices: str) -> None:
    """The default labeler holds SciFact's doc vectors for `indices`, read from its model
    cache, as a sidecar holds them once its vector store is warm. The φ is the one live
    embedding gives (tests/models: the corpus vectors' test); the modules that use this
    test serving, not labelling cost, which 2 cores would otherwise spend most of their
    time on. Docs outside SciFact, or with other text, are still embedded live."""
    from es_tour.models import DualEncoderLabeler, doc_key, unit_corpus_embeddings

    labeler = models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    docs = list(scifact.corpus())
    texts = [doc.contents for doc in docs]
    vectors = unit_corpus_embeddings(labeler.encoder, scifact.root / "corpus.jsonl", texts)
    labeler.remember({doc_key(index, doc.id, text): vector
                      for index in indices
                      for doc, text, vector in zip(docs, texts, vectors, strict=True)})


@pytest.fixture(scope="session")
async def scifact_index(nodes, scifact, retriever) -> str:
    """SciFact with MiniLM vectors in both test engines (skipped when already complete)."""
    from es_tour.ingest import ingest

    for name, status in nodes.items():
        async with connect(name, status.url) as adapter:
            await ingest(
                adapter, scifact, SCIFACT_INDEX, retriever, if_missing=True, show_progress=False
            )
    return SCIFACT_INDEX


@pytest.fixture(params=ENGINES)
def tuned_upstream(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                   scifact_index: str) -> Iterator[tuple[str, str]]:
    """(engine, url) for a test that runs `es-tour tune --apply` on the shared index, which
    gets no index.tour.* of tune's afterwards."""
    import httpx

    url = nodes[request.param].url
    yield request.param, url
    flat = httpx.get(f"{url}/{scifact_index}/_settings/index.tour.*",
                     params={"flat_settings": "true"}).json()[scifact_index]["settings"]
    reset = httpx.put(f"{url}/{scifact_index}/_settings", json=dict.fromkeys(flat))
    assert reset.status_code == 200, reset.text


# 24 short docs on four topics, and a refinement small enough for a shared CPU: the
# sidecar's ops and workers suites index and search them
TOPIC_TEXTS = [f"{topic} study number {n}" for n in range(6) for topic in (
    "vitamin D deficiency and bone health", "sleep and memory consolidation",
    "statins and heart disease", "gut bacteria and immunity")]
SMALL_REFINE = {"method": "rerank", "k": 5}


async def index_texts(engine: str, url: str, index: str, texts: Sequence[str],
                      encoder: DualEncoder) -> None:
    """A fresh small es-tour index of `texts` (ids 0, 1, ...; empty titles), searchable."""
    vectors = encoder.encode_docs(list(texts))
    async with connect(engine, url) as adapter:
        await adapter.create_index(IndexSpec(index, dimension=vectors.shape[1]), replace=True)
        await adapter.bulk_index(index, [
            {"_id": str(i), "title": "", "text": text, "embedding": vector.tolist()}
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))])
        await adapter.refresh(index)
