"""Behaviour cloning: run the oracle on training queries, fit the learned policy.

The oracle tries every candidate Δq of each state it reaches; each try is one training
example — the candidate's features in that state, labelled by whether it raised nDCG@k.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.agents._environment import Action, Environment, State, TourStep
from es_tour.agents._features import FEATURES, query_terms
from es_tour.agents._methods import run_session
from es_tour.agents._model import TreePolicy, fit_trees, policy_dir, tree_classifier
from es_tour.agents._policies import (
    Decision,
    OraclePolicy,
    features_of,
    pseudo_relevance_candidates,
)
from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine, TermStats
from es_tour.errors import ModelError
from es_tour.metrics import ndcg_at_k
from es_tour.models import DualEncoder, Labeler, load_labeler, query_encoder
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._types import Timings

_IMPROVED = 1e-9
ACT_PRECISION = 0.25  # act where at least a quarter of such held-out examples improved
FOLDS = 5  # cross-validation folds, split by query, for the held-out predictions
RETRIEVER = "minilm-l6"  # the encoder the index's vectors were made with


@dataclass(frozen=True)
class TrainReport:
    manifest: Path
    queries: int
    examples: int
    positives: int
    oracle_operators: dict[str, int]  # kind of Δq -> steps the oracle took with it
    ndcg_hre: float  # mean nDCG@k of A_0 over the training queries
    ndcg_oracle: float
    seconds: float
    held_out_accuracy: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def sample_queries(dataset: BeirDataset, split: str, max_queries: int | None,
                   seed: int = 13) -> dict[str, str]:
    """The split's judged queries, or a fixed-seed sample of `max_queries` of them."""
    queries = dataset.queries(split)
    ids = sorted(queries)
    if max_queries is not None and max_queries < len(ids):
        ids = sorted(random.Random(seed).sample(ids, max_queries))
    return {qid: queries[qid] for qid in ids}


async def train_policy(
    engine: ClientEngine, index: str, dataset: BeirDataset, split: str = "train",
    max_queries: int | None = None, out: Path | None = None, *,
    encoder: DualEncoder | None = None, labeler: Labeler | None = None, k: int = 10,
    top_k: int = 1000, m: int = 5, max_rounds: int = 5, pseudo_relevant: int = 3,
    act_precision: float = ACT_PRECISION, concurrency: int = 2, seed: int = 13,
    tour_step: TourStep | None = None, on_policy: bool = False,
) -> TrainReport:
    """Oracle sessions on `split`'s queries, then a tree policy saved under `out`.

    Examples: every oracle trial, labelled by whether it raised nDCG@k; and, in each state
    where no Δq can raise it (every relevant doc seen, or nDCG@k already 1), the learned
    agent's own candidates, labelled 0 — so the policy also learns when to stop. Given
    `tour_step`, the oracle tries TOUR's step too and the policy learns when to take it.
    With `on_policy`, the oracle tries the learned agent's own candidates (from A_t's best
    `pseudo_relevant` docs by φ) rather than its judged pools, so the trials come from the
    pool the policy will act on.

    `out` defaults to models_dir()/agent-policy; `encoder` (the index's query encoder)
    to minilm-l6 and `labeler` to the default labeler. Only `split`'s qrels are read.
    """
    started = time.perf_counter()
    context = SearchContext(engine, index, encoder or query_encoder(RETRIEVER),
                            labeler or load_labeler("default"), query_vectors={})
    queries = sample_queries(dataset, split, max_queries, seed)
    context.embed_ahead(list(queries.values()))
    qrels = dataset.qrels(split)
    gate = asyncio.Semaphore(concurrency)

    async def one(qid: str) -> tuple[list[np.ndarray], list[np.ndarray], list[str], float, float]:
        async with gate:
            env = Environment(context, k, top_k)
            oracle = OraclePolicy(qrels[qid], m, k, tour_step,
                                  pseudo_relevant if on_policy else None)
            session = await run_session(env, oracle, queries[qid], max_rounds, Timings())
            xs, ys = [], []
            for state, decision in zip(session.states, session.decisions, strict=True):
                deltas, stats, tokens = await _examples(env, state, decision, oracle,
                                                        pseudo_relevant)
                if deltas:
                    xs.append(features_of(deltas, stats, state, tokens))
                    ys.append(np.array([s.score > _IMPROVED for s in decision.considered]
                                       if decision.considered else np.zeros(len(deltas))))
        kinds = [d.chosen.kind for d in session.decisions if d.chosen is not None]
        return (xs, ys, kinds, ndcg_at_k(session.states[0].answer, qrels[qid], k),
                ndcg_at_k(session.states[-1].answer, qrels[qid], k))

    results = await asyncio.gather(*(one(qid) for qid in queries))
    X = np.vstack([x for r in results for x in r[0]] or [np.zeros((0, len(FEATURES)))])
    y = np.concatenate([v for r in results for v in r[1]] or [np.zeros(0)])
    groups = np.concatenate([np.full(len(v), i) for i, r in enumerate(results) for v in r[1]]
                            or [np.zeros(0)])
    operators = Counter(kind for r in results for kind in r[2])
    if not len(y):
        raise ModelError(f"the oracle tried no refinement on {len(queries)} {split} queries; "
                         "nothing to learn from")
    improved_queries = len(set(groups[y > 0].tolist()))
    if improved_queries < 2:
        # nothing to tell good Δq from bad: a policy that never acts, and says why
        model = TreePolicy(fit_trees(X, y, seed) if y.max() > 0 else None, 1.0)
        held_out = model.predict(X)
    else:
        # the threshold comes from held-out predictions (in-sample, trees are overconfident),
        # folds split by query, each holding some of the queries with an improvement
        from sklearn.model_selection import StratifiedGroupKFold, cross_val_predict

        held_out = cross_val_predict(
            tree_classifier(seed), X, y.astype(int), groups=groups,
            cv=StratifiedGroupKFold(n_splits=min(FOLDS, improved_queries), shuffle=True,
                                    random_state=seed),
            method="predict_proba")[:, 1]
        model = TreePolicy(fit_trees(X, y, seed), act_threshold(held_out, y, act_precision))
    top = np.argsort(-held_out, kind="stable")
    precision_at = {str(n): round(float(y[top[:n]].mean()), 3) for n in (10, 25, 50, 100, 250)
                    if n <= len(y)}
    accuracy = float(((held_out >= model.threshold) == (y > 0)).mean())
    seconds = time.perf_counter() - started
    info = {
        "training": {
            "dataset": dataset.name, "split": split, "queries": len(queries),
            "examples": len(y), "positives": int(y.sum()), "seed": seed,
            "engine": context.engine.name, "index": context.index,
            "labeler": getattr(context.labeler, "name", "?"),
            "k": k, "top_k": top_k, "m": m, "max_rounds": max_rounds,
            "seconds": round(seconds, 1), "held_out_accuracy": round(accuracy, 4),
            "act_precision": act_precision, "held_out_precision_at": precision_at,
            "threshold": model.threshold, "improved_queries": improved_queries,
            "tour_action": tour_step is not None, "on_policy": on_policy,
        },
        "oracle_operators": dict(sorted(operators.items())),
    }
    manifest = model.save(out or policy_dir(), info)
    return TrainReport(manifest, len(queries), len(y), int(y.sum()),
                       dict(sorted(operators.items())),
                       float(np.mean([r[3] for r in results])) if results else 0.0,
                       float(np.mean([r[4] for r in results])) if results else 0.0,
                       seconds, accuracy, info)


async def _examples(env: Environment, state: State, decision: Decision, oracle: OraclePolicy,
                    pseudo_relevant: int) -> tuple[list[Action], TermStats, list[str]]:
    """The candidates of one state to learn from: the oracle's trials, or — where no Δq
    could raise nDCG (every relevant doc seen, or nDCG already 1) — the learned agent's
    own candidates, each a 0."""
    tokens = await env.q0_tokens(Timings())
    if decision.considered:
        stats = await env.term_stats([*state.answer, *oracle.relevant], Timings())
        return [s.delta for s in decision.considered], stats, tokens
    stats = await env.term_stats(state.answer, Timings())
    if oracle.hopeless(state):
        used = query_terms(state.query, tokens)
        return (pseudo_relevance_candidates(state, stats, used, oracle.m, pseudo_relevant,
                                            oracle.tour_step), stats, tokens)
    return [], stats, tokens


def act_threshold(scores: np.ndarray, labels: np.ndarray, precision: float) -> float:
    """The lowest score at which the trials scored at least that high are `precision` good.

    scores, labels: (n,). 1.0 (never act) when no such score exists.
    """
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(labels[order] > 0) / np.arange(1, len(order) + 1)
    good = np.nonzero(hits >= precision)[0]
    return float(scores[order][good[-1]]) if len(good) else 1.0
