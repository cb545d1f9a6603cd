"""Ranking metrics, all through ir-measures, so every figure is trec_eval's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures
from ir_measures import RR, R, nDCG

MEASURES = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}

# a query whose nDCG@10 falls this far below the reference's counts as hurt
HURT_AT = 0.2
# a query's nDCG@10 moved more than this: a win or a loss (closer is unchanged)
CHANGED = 0.01

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


@dataclass(frozen=True)
class Robustness:
    """A method against a reference, query by query: the queries it ranks better (wins)
    or worse (losses) by more than CHANGED, and worse by at least HURT_AT (hurt), of the
    queries both ran."""

    wins: int
    losses: int
    hurt: int
    queries: int

    @property
    def index(self) -> float:
        """The robustness index, (wins − losses) / queries: +1 never worse, −1 never better."""
        return (self.wins - self.losses) / self.queries if self.queries else 0.0

    @property
    def hurt_share(self) -> float:
        return self.hurt / self.queries if self.queries else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"wins": self.wins, "losses": self.losses, "hurt": self.hurt,
                "queries": self.queries, "index": round(self.index, 4),
                "hurt_share": round(self.hurt_share, 4)}


def robustness(ndcg: Mapping[str, float], reference: Mapping[str, float],
               hurt_at: float = HURT_AT) -> Robustness:
    """Per-query nDCG@10 (query id -> value) against the reference's on the same queries."""
    deltas = [ndcg[qid] - reference[qid] for qid in ndcg if qid in reference]
    return Robustness(wins=sum(d > CHANGED for d in deltas),
                      losses=sum(d < -CHANGED for d in deltas),
                      hurt=sum(d <= -hurt_at + 1e-9 for d in deltas), queries=len(deltas))
