"""`es-tour warm`: fill a labeler's vector store for every doc of an index ahead of the
searches, so that none of them waits for the labeler to embed a doc."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from es_tour.engines import ClientEngine
from es_tour.models import DualEncoderLabeler, doc_key
from es_tour.pipeline._context import doc_text
from es_tour.pipeline._vector_store import VectorStore, record, record_id, store_index

WARM_BATCH = 32  # docs read, looked up and embedded together


@dataclass
class WarmReport:
    store: str
    docs: int = 0  # docs of the index seen
    stored: int = 0  # already in the store: skipped (a resumed run skips its earlier work)
    written: int = 0  # vectors the store lacked: embedded (or found in memory) and stored
    seconds: float = 0.0


async def warm(engine: ClientEngine, index: str, labeler: DualEncoderLabeler,
               text_fields: Sequence[str], *, rate: float | None = None,
               batch: int = WARM_BATCH, on_batch: Callable[[int], None] = lambda _: None
               ) -> WarmReport:
    """Store `labeler`'s vector of each doc of `index` (its `text_fields`, as a search would
    fetch them) that the store lacks; `rate`: at most that many docs embedded per second.
    Resumable: an interrupted run's stored vectors are skipped by the next. `on_batch` gets
    the number of docs of each batch done. Engine errors raise: warming is asked for."""
    store = VectorStore(engine)
    report = WarmReport(store_index(labeler))
    started = time.perf_counter()
    async for hits in engine.scan(index, text_fields, batch=batch):
        # keyed by the concrete index that holds each doc, as searches key them: warming an
        # alias warms its index
        texts = {doc_key(hit.index or index, hit.id, text): text
                 for hit in hits if (text := doc_text(hit.source, text_fields))}
        keys = list(texts)
        held = await store.read(report.store, [record_id(key) for key in keys])
        new = [key for key in keys if record_id(key) not in held]
        if new:
            vectors = await asyncio.to_thread(labeler.doc_vectors, new,
                                              [texts[key] for key in new])
            await store.write(report.store, {record_id(key): record(key, vector)
                                             for key, vector in zip(new, vectors, strict=True)})
        report.docs += len(hits)
        report.stored += len(keys) - len(new)
        report.written += len(new)
        on_batch(len(hits))
        if rate:  # throttled: the labeler shares the machine with the searches
            ahead = report.written / rate - (time.perf_counter() - started)
            if ahead > 0:
                await asyncio.sleep(ahead)
    report.seconds = time.perf_counter() - started
    return report
