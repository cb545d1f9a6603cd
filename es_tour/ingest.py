"""Ingest a BEIR corpus: embed docs with the ONNX dual encoder and bulk-index them."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from es_tour.datasets import METADATA_FIELDS, BeirDataset, Document, synthetic_metadata
from es_tour.engines import ClientEngine, IndexSpec
from es_tour.errors import EsTourError
from es_tour.models import DualEncoder, corpus_embeddings


class IngestError(EsTourError):
    error_type = "ingest_exception"


@dataclass(frozen=True)
class IngestReport:
    index: str
    docs: int
    indexed: int
    retried: int
    seconds: float
    skipped: bool = False
    rebuilt: bool = False  # the index existed with other mappings and was made anew

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds if self.seconds else 0.0


def index_spec(name: str, encoder: DualEncoder, *, metadata: bool = False) -> IndexSpec:
    """Text fields for BM25 and a vector field whose similarity matches the encoder; with
    `metadata`, the synthetic `year` and `topic` fields too."""
    return IndexSpec(
        name, encoder.dimension, similarity="dot_product" if encoder.normalized else "cosine",
        metadata_fields=tuple(METADATA_FIELDS.items()) if metadata else (),
    )


async def ingest(
    engine: ClientEngine,
    dataset: BeirDataset,
    index: str,
    encoder: DualEncoder,
    *,
    batch_size: int = 256,
    replace: bool = False,
    reuse_embeddings: bool = True,
    if_missing: bool = False,
    show_progress: bool = True,
    max_docs: int | None = None,
    metadata: bool = False,
) -> IngestReport:
    """Index every doc of `dataset` by its stable id; re-running never duplicates.

    Embedding of the next batch overlaps bulk indexing of the current one, so the engine
    is not the bottleneck. `reuse_embeddings` loads the corpus vectors cached by the model
    (computing and caching them on the first run); `if_missing` skips a complete index.
    An existing index with other mappings is rebuilt when es-tour made it (an older
    analyzer, say); one es-tour did not make is an IngestError unless `replace`, since
    rebuilding it deletes its docs.
    `max_docs` indexes only the corpus's first docs (trials, benchmarks). `metadata` adds
    each doc's `synthetic_metadata` (a year and a topic to filter and facet on).
    """
    docs = list(dataset.corpus())[:max_docs]
    started = time.perf_counter()
    spec = index_spec(index, encoder, metadata=metadata)
    created = await engine.create_index(spec, replace=replace)
    rebuilt = not created and not await engine.index_matches(spec)
    if rebuilt:  # an older mapping (another analyzer, say) ranks otherwise: start afresh
        if not await engine.made_by_es_tour(index):
            raise IngestError(f"index [{index}] exists with mappings es-tour did not make; "
                              "rebuilding it would delete its docs: choose another index "
                              f"name, or rebuild it with `es-tour index --replace --index "
                              f"{index}`")
        await engine.create_index(spec, replace=True)
    if if_missing and not created and not rebuilt and await engine.count(index) == len(docs):
        return IngestReport(index, len(docs), 0, 0, 0.0, skipped=True)
    cached = None
    if reuse_embeddings:
        if max_docs is not None:
            raise IngestError("max_docs indexes part of the corpus; it cannot reuse the "
                              "whole corpus's cached embeddings (set reuse_embeddings=False)")
        texts = [doc.contents for doc in docs]
        cached, _ = corpus_embeddings(encoder, dataset.root / "corpus.jsonl", texts)
    batches = [docs[i : i + batch_size] for i in range(0, len(docs), batch_size)]
    corpus_encoder = encoder if cached is not None else encoder.for_corpus()

    def embed(number: int) -> np.ndarray:
        if cached is not None:
            return cached[number * batch_size : number * batch_size + len(batches[number])]
        return corpus_encoder.encode_docs([doc.contents for doc in batches[number]])

    indexed = retried = 0
    failed: list[dict[str, Any]] = []
    with _progress(show_progress) as progress:
        task = progress.add_task(f"indexing {dataset.name} into {index}", total=len(docs))
        next_vectors = asyncio.create_task(asyncio.to_thread(embed, 0))
        for number, batch in enumerate(batches):
            vectors = await next_vectors
            if number + 1 < len(batches):
                next_vectors = asyncio.create_task(asyncio.to_thread(embed, number + 1))
            report = await engine.bulk_index(index, _actions(batch, vectors, metadata))
            indexed, retried = indexed + report.indexed, retried + report.retried
            failed.extend(report.failed)
            progress.advance(task, len(batch))
    if failed:
        raise IngestError(f"{len(failed)} docs failed to index after retries; first: {failed[0]}")
    await engine.refresh(index)
    count = await engine.count(index)
    if count != len(docs):
        raise IngestError(f"index [{index}] holds {count} docs, expected {len(docs)}")
    return IngestReport(
        index, len(docs), indexed, retried, time.perf_counter() - started, rebuilt=rebuilt
    )


def _actions(batch: list[Document], vectors: np.ndarray, metadata: bool
             ) -> list[dict[str, Any]]:
    return [
        {"_id": doc.id, "title": doc.title, "text": doc.text, "embedding": vector.tolist(),
         **(synthetic_metadata(doc.id) if metadata else {})}
        for doc, vector in zip(batch, vectors, strict=True)
    ]


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
    )
