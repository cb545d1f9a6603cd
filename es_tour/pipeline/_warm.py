"""`es-tour warm`: fill a labeler's vector stores (an ensemble's: each member's) for every
doc of an index ahead of the searches, so that none of them waits for a model to embed a
doc."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from es_tour.engines import ClientEngine
from es_tour.errors import ConfigError
from es_tour.models import DocKey, DualEncoderLabeler, Labeler, doc_key, vector_labelers
from es_tour.pipeline._context import doc_text
from es_tour.pipeline._vector_store import VectorStore, record, record_id, store_index

WARM_BATCH = 32  # docs read, looked up and embedded together


@dataclass
class WarmReport:
    stores: list[str]  # one per dual encoder warmed: the labeler's, or each member's
    docs: int = 0  # docs of the index seen
    stored: int = 0  # vectors already in a store: skipped (a resumed run skips its work)
    written: int = 0  # vectors a store lacked: embedded (or found in memory) and stored
    seconds: float = 0.0


async def warm(engine: ClientEngine, index: str, labeler: Labeler,
               text_fields: Sequence[str], *, rate: float | None = None,
               batch: int = WARM_BATCH, on_batch: Callable[[int], None] = lambda _: None
               ) -> WarmReport:
    """Store each dual encoder's vector (the labeler's, or every member's of an ensemble)
    of each doc of `index` (its `text_fields`, as a search would fetch them) that its store
    lacks; `rate`: at most that many vectors embedded per second. Resumable: an interrupted
    run's stored vectors are skipped by the next. `on_batch` gets the number of docs of
    each batch done. Engine errors raise: warming is asked for."""
    members = vector_labelers(labeler)
    if not members:
        raise ConfigError(f"labeler [{labeler.name}] is a cross-encoder: it has no doc "
                          "vectors to store (its scores depend on the query)")
    store = VectorStore(engine)
    report = WarmReport([store_index(member) for member in members])
    started = time.perf_counter()
    async for hits in engine.scan(index, text_fields, batch=batch):
        # keyed by the concrete index that holds each doc, as searches key them: warming an
        # alias warms its index
        texts = {doc_key(hit.index or index, hit.id, text): text
                 for hit in hits if (text := doc_text(hit.source, text_fields))}
        for member, name in zip(members, report.stores, strict=True):
            await _warm_batch(store, name, member, texts, report)
        report.docs += len(hits)
        on_batch(len(hits))
        if rate:  # throttled: the labeler shares the machine with the searches
            ahead = report.written / rate - (time.perf_counter() - started)
            if ahead > 0:
                await asyncio.sleep(ahead)
    report.seconds = time.perf_counter() - started
    return report


async def _warm_batch(store: VectorStore, name: str, labeler: DualEncoderLabeler,
                      texts: Mapping[DocKey, str], report: WarmReport) -> None:
    """Embed and write the vectors of `texts` that the store `name` lacks."""
    keys = list(texts)
    held = await store.read(name, [record_id(key) for key in keys])
    new = [key for key in keys if record_id(key) not in held]
    if new:
        vectors = await asyncio.to_thread(labeler.doc_vectors, new, [texts[key] for key in new])
        await store.write(name, {record_id(key): record(key, vector)
                                 for key, vector in zip(new, vectors, strict=True)})
    report.stored += len(keys) - len(new)
    report.written += len(new)
