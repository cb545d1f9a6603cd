"""Ranking metrics, all through ir-measures, so every figure is trec_eval's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
from ir_measures import RR, R, nDCG

MEASURES = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}

Qrels = Mapping[str, Mapping[str, int]]  # query id -> {doc id: relevance}
Run = Mapping[str, Mapping[str, float]]  # query id -> {doc id: score}


def ranked(ranking: Sequence[str]) -> dict[str, float]:
    """One ranked list of doc ids as a run's scores: scores by rank, as trec_eval would
    otherwise reorder equal scores by id."""
    return {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}


def score_run(qrels: Qrels, run: Run) -> dict[str, float]:
    """nDCG@10, Recall@100 and MRR@10 averaged over the run's judged queries."""
    judged = {qid: dict(docs) for qid, docs in qrels.items() if qid in run}
    aggregate = ir_measures.calc_aggregate(list(MEASURES.values()), judged, run)
    return {name: float(aggregate.get(measure, 0.0)) for name, measure in MEASURES.items()}


def ndcg_at_k(ranking: Sequence[str], judgements: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranked list of doc ids; 0 when nothing in `judgements` is relevant."""
    if not ranking or not any(rel > 0 for rel in judgements.values()):
        return 0.0
    run = {"q": ranked(ranking)}
    return float(ir_measures.calc_aggregate([nDCG @ k], {"q": dict(judgements)}, run)[nDCG @ k])
