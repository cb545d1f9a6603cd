"""Model calls on the ModelPool: off the event loop, in batches, and cancellable between them."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from es_tour.engines import Hit
from es_tour.models import DualEncoderLabeler
from es_tour.models._labelers import doc_key
from es_tour.pipeline import ModelPool, SearchContext, Timings
from es_tour.tour import LabelCache


class RecordingLabeler:
    """Scores 1.0 per doc, records each batch and the thread it ran on; `gate` holds the
    first batch until the test lets it go."""

    name = "recording"
    pairs_scored = 0

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()
        self.started = threading.Event()
        self.gate = threading.Event()

    def score(self, query, docs, index=""):
        self.started.set()
        self.gate.wait(timeout=30)
        self.batches.append([doc_id for doc_id, _ in docs])
        self.threads.add(threading.current_thread().name)
        return np.ones(len(docs), dtype=np.float32)


def _context(labeler: RecordingLabeler, pool: ModelPool | None) -> SearchContext:
    return SearchContext(None, "idx", None, labeler, pool=pool, label_batch=16)  # type: ignore[arg-type]


HITS = [Hit(str(i), 1.0, {"text": f"doc {i}"}) for i in range(40)]


async def test_labelling_runs_on_the_pool_in_batches() -> None:
    labeler, pool = RecordingLabeler(), ModelPool(2)
    labeler.gate.set()
    try:
        phi, newly = await _context(labeler, pool).label("q", HITS, Timings(), LabelCache())
    finally:
        pool.close()
    assert newly == 40 and phi.shape == (40,)
    assert [len(batch) for batch in labeler.batches] == [16, 16, 8]
    assert threading.current_thread().name not in labeler.threads
    assert all(name.startswith("es-tour-labeler") for name in labeler.threads)


async def test_without_a_pool_the_labeler_runs_inline_in_one_call() -> None:
    labeler = RecordingLabeler()
    labeler.gate.set()
    await _context(labeler, None).label("q", HITS, Timings(), LabelCache())
    assert [len(batch) for batch in labeler.batches] == [40]


async def test_a_cancelled_search_stops_after_the_batch_that_is_running() -> None:
    labeler, pool = RecordingLabeler(), ModelPool(1)
    task = asyncio.create_task(_context(labeler, pool).label("q", HITS, Timings(), LabelCache()))
    await asyncio.to_thread(labeler.started.wait, 30)
    task.cancel()
    labeler.gate.set()  # the running batch finishes on its thread
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.to_thread(pool.close, True)
    assert task.cancelled() and len(labeler.batches) == 1



class FixedEncoder:
    """A dual encoder of fixed 4-d vectors."""

    dimension = 4

    def encode_queries(self, texts):
        return np.tile(np.eye(1, 4, dtype=np.float32), (len(texts), 1))

    def encode_docs(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


class ThreadRecordingLabeler(DualEncoderLabeler):
    """Records the thread each `score` call runs on."""

    def __init__(self) -> None:
        super().__init__(FixedEncoder(), "fixed")  # type: ignore[arg-type]
        self.threads: list[str] = []

    def score(self, query, docs, index=""):
        self.threads.append(threading.current_thread().name)
        return super().score(query, docs, index)


async def test_labels_from_vectors_in_memory_are_scored_on_the_loop_not_a_pool_thread() -> None:
    labeler, pool = ThreadRecordingLabeler(), ModelPool(2)
    held, unheld = HITS[:4], HITS[4:8]
    labeler.query_vector("q")  # as `embed_labeler_query` leaves it
    labeler.remember({doc_key("idx", hit.id, hit.source["text"]):
                      np.eye(1, 4, int(hit.id), dtype=np.float32)[0] for hit in held})
    context = SearchContext(None, "idx", None, labeler, pool=pool,  # type: ignore[arg-type]
                            text_fields=("text",))
    try:
        phi, newly = await context.label("q", held, Timings(), LabelCache())
        assert phi.tolist() == [1.0, 0.0, 0.0, 0.0] and newly == 4
        assert labeler.threads == [] and labeler.docs_embedded == 0
        await context.label("q", unheld, Timings(), LabelCache())  # must embed: the pool
    finally:
        pool.close()
    assert labeler.docs_embedded == 4
    assert labeler.threads and all(name.startswith("es-tour-labeler")
                                   for name in labeler.threads)
