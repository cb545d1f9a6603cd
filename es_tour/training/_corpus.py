"""Choose the offline labeler: exact dense search over a BEIR corpus, scored by nDCG@10."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from es_tour.datasets import BeirSplit
from es_tour.metrics import score_run
from es_tour.models import DualEncoder
from es_tour.models._corpus_cache import corpus_embeddings

TOP_K = 100


@dataclass(frozen=True)
class EncoderEvaluation:
    """nDCG@10 of one model on one split; docs_per_s is the corpus encoding rate."""

    model: str
    split: str
    precision: str
    ndcg_at_10: float
    queries: int
    docs: int
    docs_per_s: float
    groups: dict[str, tuple[float, int]] = field(default_factory=dict)  # name: (nDCG@10, q)


def exact_search(
    queries: np.ndarray, docs: np.ndarray, k: int = TOP_K
) -> tuple[np.ndarray, np.ndarray]:
    """queries: (q, d), docs: (n, d) -> (rows (q, k) int, scores (q, k) float32), best first."""
    scores = queries @ docs.T
    k = min(k, docs.shape[0])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top_scores = np.take_along_axis(scores, top, axis=1)
    order = np.argsort(-top_scores, axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1), np.take_along_axis(top_scores, order, axis=1)


def run_ndcg_at_10(data: BeirSplit, run: Mapping[str, Mapping[str, float]]) -> float:
    """run: query id -> {doc id: score} -> mean nDCG@10 over the run's queries."""
    return score_run(data.qrels, run)["ndcg@10"]


def evaluate_encoder(
    encoder: DualEncoder, data: BeirSplit, split: str, name: str | None = None,
    groups: Mapping[str, Collection[str]] | None = None,
) -> EncoderEvaluation:
    """Exact search of data's queries over its whole corpus with `encoder`; `groups` (name:
    query ids) are scored apart too."""
    docs, rate = corpus_embeddings(encoder, data.corpus_path, data.doc_texts)
    queries = encoder.encode_queries(data.query_texts)
    rows, scores = exact_search(queries, docs)
    run = {qid: {data.doc_ids[r]: float(s) for r, s in zip(rs, ss, strict=True)}
           for qid, rs, ss in zip(data.query_ids, rows, scores, strict=True)}
    return EncoderEvaluation(
        groups={name: (round(run_ndcg_at_10(data, {q: run[q] for q in ids if q in run}), 4),
                       len(ids)) for name, ids in (groups or {}).items() if ids},
        model=name or encoder.manifest.name or encoder.path.name,
        split=split,
        precision=encoder.precision,
        ndcg_at_10=round(run_ndcg_at_10(data, run), 4),
        queries=len(data.query_ids),
        docs=len(data.doc_ids),
        docs_per_s=round(rate, 1),
    )


def judged_apart(query_ids: Sequence[str], qrels: Mapping[str, Mapping[str, int]],
                 other: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
    """The judged queries of `query_ids` (by `qrels`) parted by whether a doc judged
    relevant for one was judged relevant for a query of `other` (qrels): how much a model
    tuned on `other` can have learned which docs, not which words, are relevant."""
    seen = {doc for judged in other.values() for doc, grade in judged.items() if grade > 0}
    parts: dict[str, list[str]] = {"a judged doc seen": [], "judged docs new": []}
    for qid in query_ids:
        judged = [doc for doc, grade in qrels.get(qid, {}).items() if grade > 0]
        if judged:
            parts["a judged doc seen" if seen.intersection(judged) else
                  "judged docs new"].append(qid)
    return parts
