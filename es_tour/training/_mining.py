"""Rerank a first stage's candidates and score the result: what trains and judges rerankers.

Candidates come from the real engine (BM25, and kNN with the retriever). No torch here:
the dual-encoder scorer is also the fine-tuning teacher, the evaluation runs on ONNX.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest
from typing import TYPE_CHECKING

import numpy as np
from rich.progress import Progress

from es_tour.datasets import BeirSplit
from es_tour.models._corpus_cache import cached_corpus_embeddings, corpus_embeddings
from es_tour.models._labelers import model_directory
from es_tour.models._manifest import read_manifest
from es_tour.models._runtime import CrossEncoder, DualEncoder, l2_normalize
from es_tour.training._corpus import run_ndcg_at_10

if TYPE_CHECKING:
    from es_tour.engines import SearchEngine

VECTOR_FIELD = "embedding"  # what `es_tour.ingest` indexes; never needed in the hits
DocScorer = Callable[[str, Sequence[str]], np.ndarray]  # (query, doc ids) -> (n,) scores


async def mine_candidates(
    engine: SearchEngine,
    index: str,
    queries: Mapping[str, str],
    depth: int,
    retriever: DualEncoder | None = None,
    progress: Progress | None = None,
) -> dict[str, list[str]]:
    """query id -> doc ids, best first: BM25's top `depth`, interleaved with kNN's top
    `depth` when a retriever is given (each doc once)."""
    vectors = retriever.encode_queries(list(queries.values())) if retriever else None
    task = progress.add_task("mining candidates", total=len(queries)) if progress else None
    mined = {}
    for row, (qid, text) in enumerate(queries.items()):
        lists = [await engine.bm25(index, text, depth, exclude=[VECTOR_FIELD])]
        if vectors is not None:
            lists.append(await engine.knn(index, vectors[row], depth, field=VECTOR_FIELD,
                                          returns="ids"))
        interleaved = [hit.id for rank in zip_longest(*lists) for hit in rank if hit]
        mined[qid] = list(dict.fromkeys(interleaved))
        if progress and task is not None:
            progress.advance(task)
    return mined


class DualScorer:
    """φ = cosine of a dual encoder's query and doc vectors, for docs of a BEIR corpus.

    Doc vectors come from the model's corpus cache; with `encode_corpus` a missing cache
    is built first (the whole corpus, as `es-tour models evaluate` does), otherwise each
    doc is encoded the first time it is scored, so a short training run pays only for the
    docs it sees. `docs_encoded` counts those.
    """

    def __init__(self, encoder: DualEncoder, data: BeirSplit, encode_corpus: bool = False):
        self.encoder = encoder
        self._rows = {doc_id: row for row, doc_id in enumerate(data.doc_ids)}
        self._texts = data.doc_texts
        corpus = corpus_embeddings if encode_corpus else cached_corpus_embeddings
        cached = corpus(encoder, data.corpus_path, data.doc_texts)
        self.from_cache = cached is not None
        self._corpus = l2_normalize(cached[0]) if cached is not None else None
        self._encoded: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}
        self.docs_encoded = 0

    def __call__(self, query: str, doc_ids: Sequence[str]) -> np.ndarray:
        """query and n doc ids -> (n,) float32 cosines."""
        q = self._queries.get(query)
        if q is None:
            q = self._queries[query] = l2_normalize(self.encoder.encode_queries([query]))[0]
        return np.asarray(self._doc_vectors(doc_ids) @ q)

    def _doc_vectors(self, doc_ids: Sequence[str]) -> np.ndarray:
        if self._corpus is not None:
            return self._corpus[[self._rows[d] for d in doc_ids]]
        new = [d for d in dict.fromkeys(doc_ids) if d not in self._encoded]
        if new:
            texts = [self._texts[self._rows[d]] for d in new]
            vectors = l2_normalize(self.encoder.encode_docs(texts))
            self._encoded.update(zip(new, vectors, strict=True))
            self.docs_encoded += len(new)
        return np.stack([self._encoded[d] for d in doc_ids])


def cross_scorer(encoder: CrossEncoder, data: BeirSplit) -> DocScorer:
    """(query, doc ids) -> the cross-encoder's scores of the docs' texts."""
    texts = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    return lambda query, doc_ids: encoder.score(query, [texts[d] for d in doc_ids])


def model_scorer(
    name: str,
    data: BeirSplit,
    precision: str = "fp32",
    threads: int | None = None,
    encode_corpus: bool = False,
) -> DocScorer:
    """A registry name or model directory -> its scorer over `data`'s corpus: a
    `DualScorer` for a dual model, `cross_scorer` for a cross model."""
    path, _ = model_directory(name)
    if read_manifest(path).kind == "cross":
        return cross_scorer(CrossEncoder(path, precision, threads), data)
    return DualScorer(DualEncoder(path, precision, threads), data, encode_corpus)


def rerank_ndcg(
    data: BeirSplit,
    candidates: Mapping[str, Sequence[str]],
    score: DocScorer,
    progress: Progress | None = None,
    label: str = "reranking",
) -> float:
    """nDCG@10 of ordering each query's candidates by `score` (queries of `candidates`)."""
    texts = dict(zip(data.query_ids, data.query_texts, strict=True))
    task = progress.add_task(label, total=len(candidates)) if progress else None
    run = {}
    for qid, doc_ids in candidates.items():
        run[qid] = dict(zip(doc_ids, score(texts[qid], doc_ids).tolist(), strict=True))
        if progress and task is not None:
            progress.advance(task)
    return run_ndcg_at_10(data, run)


def first_stage_ndcg(data: BeirSplit, candidates: Mapping[str, Sequence[str]]) -> float:
    """nDCG@10 of the candidates in their own (first-stage) order."""
    run = {qid: {d: -float(rank) for rank, d in enumerate(ids)} for qid, ids in candidates.items()}
    return run_ndcg_at_10(data, run)

