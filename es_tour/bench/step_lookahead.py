"""Can a policy tell when TOUR's step pays by looking at the docs it would bring?

For each query of a split: the HRE's round 0 (BM25's and kNN's top k, labelled), then
TOUR's step (`TourStep`, the soft loss). The step's new docs are labelled only to measure
its nDCG@10 gain. The features are what a policy could see before spending those labels:
φ of the docs seen, and the stored retriever vectors of the docs seen and of the docs the
moved vector brings (`LOOKAHEAD_FEATURES`). The report gives the gain of always stepping
and of a perfect choice, each feature's AUC for "the step raised nDCG@10", and the gain of
a tree policy that steps when its probability is at least 0.5: cross-validated on train,
then fitted on train and run on test.

    python -m es_tour.bench.step_lookahead --dataset ../shared/datasets/scifact \
        --url http://127.0.0.1:9200
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import numpy as np
from rich.progress import Progress
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from es_tour.agents import Environment, TourStep, tree_classifier
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.metrics import ndcg_at_k
from es_tour.pipeline import SearchContext, Timings

LOOKAHEAD_FEATURES: tuple[str, ...] = (
    "predicted_phi_max", "predicted_phi_mean", "nearest_phi_max", "top_similarity_max",
    "top_similarity_mean", "query_similarity_max", "query_similarity_mean", "step_cosine",
    "predicted_entries", "phi_spread", "phi_range",
)
NEIGHBOUR_SCALE = 20.0  # softmax scale over cosines, as sentence-transformers trains them
TOP_DOCS = 3  # A_t's best docs by φ, for the top_similarity features
ACT_AT = 0.5  # the policy steps when p(gain) reaches this
FOLDS = 5


@dataclass(frozen=True)
class StepTrial:
    """One query's TOUR step from round 0: its features and its nDCG@10 gain."""

    features: np.ndarray  # (len(LOOKAHEAD_FEATURES),)
    gain: float


def lookahead_features(phi_seen: np.ndarray, seen: np.ndarray, new: np.ndarray,
                       q0: np.ndarray, q1: np.ndarray, k: int) -> np.ndarray:
    """What a policy sees of a step before labelling its docs.

    phi_seen: (n,) φ of the docs seen; seen: (n, d) and new: (m, d) their stored retriever
    vectors and those of the step's new docs; q0, q1: (d,) the query vector before and
    after the step. Each new doc's φ is predicted from its seen neighbours (a softmax over
    cosines), and compared with the φ of A_t's k-th doc, the bar it must pass to enter.
    """
    phi_seen = np.asarray(phi_seen, dtype=np.float64)
    ranked = np.sort(phi_seen)[::-1]
    bar = ranked[min(k, len(ranked)) - 1]
    state = (float(phi_seen.std()), float(ranked[0] - bar))
    if len(new) == 0:
        return np.array([0.0] * (len(LOOKAHEAD_FEATURES) - len(state)) + list(state))
    seen_u, new_u = _unit(seen), _unit(new)
    cosines = new_u @ seen_u.T  # (m, n)
    weights = np.exp(NEIGHBOUR_SCALE * (cosines - cosines.max(axis=1, keepdims=True)))
    predicted = (weights / weights.sum(axis=1, keepdims=True)) @ phi_seen
    nearest = phi_seen[cosines.argmax(axis=1)]
    top = cosines[:, np.argsort(-phi_seen, kind="stable")[:TOP_DOCS]].max(axis=1)
    to_query = new_u @ _unit(q0)
    return np.array([
        predicted.max() - bar, predicted.mean() - bar, nearest.max() - bar,
        top.max(), top.mean(), to_query.max(), to_query.mean(),
        float(_unit(q0) @ _unit(q1)), float((predicted > bar).sum()), *state,
    ])


def policy_gain(gains: np.ndarray, probabilities: np.ndarray, act_at: float = ACT_AT) -> float:
    """Mean nDCG@10 gain over all queries when the policy steps only where p ≥ act_at."""
    return float(np.where(probabilities >= act_at, gains, 0.0).mean())


async def step_trial(context: SearchContext, query: str, judgements: dict[str, int],
                     k: int = 10) -> StepTrial:
    timings = Timings()
    env = Environment(context, k=k)
    start = await env.start(query, timings)
    stepped = await env.step(start, TourStep(), timings)
    seen, new = list(start.phi), list(stepped.returned.get("knn", ()))
    assert start.vector is not None and stepped.vector is not None  # TOUR's step moved it
    features = lookahead_features(
        np.array([start.phi[doc] for doc in seen]), env.stored_vectors(seen),
        env.stored_vectors(new), start.vector, stepped.vector, k)
    gain = ndcg_at_k(stepped.answer, judgements) - ndcg_at_k(start.answer, judgements)
    return StepTrial(features, gain)


async def collect(context: SearchContext, dataset: BeirDataset, split: str,
                  concurrency: int = 4) -> list[StepTrial]:
    qrels = dataset.qrels(split)
    queries = [(text, qrels[qid]) for qid, text in dataset.queries(split).items()
               if qid in qrels]
    gate = asyncio.Semaphore(concurrency)
    with Progress() as progress:
        task = progress.add_task(f"TOUR's step, {split}", total=len(queries))

        async def one(query: str, judged: dict[str, int]) -> StepTrial:
            async with gate:
                trial = await step_trial(context, query, judged)
            progress.advance(task)
            return trial

        return list(await asyncio.gather(*(one(q, j) for q, j in queries)))


def report(train: list[StepTrial], test: list[StepTrial]) -> str:
    X, gains = np.stack([t.features for t in train]), np.array([t.gain for t in train])
    X_test, gains_test = (np.stack([t.features for t in test]),
                          np.array([t.gain for t in test]))
    raised = (gains > 0).astype(int)
    held_out = cross_val_predict(tree_classifier(), X, raised, method="predict_proba",
                                 cv=StratifiedKFold(FOLDS, shuffle=True, random_state=13))[:, 1]
    fitted = tree_classifier().fit(X, raised).predict_proba(X_test)[:, 1]
    lines = ["| split | queries | raised | lowered | always step | perfect choice | "
             "tree policy | steps taken |", "|---|---|---|---|---|---|---|---|"]
    for split, g, p in (("train (5-fold)", gains, held_out), ("test", gains_test, fitted)):
        lines.append(f"| {split} | {len(g)} | {(g > 0).sum()} | {(g < 0).sum()} | "
                     f"{g.mean():+.4f} | {np.clip(g, 0, None).mean():+.4f} | "
                     f"{policy_gain(g, p):+.4f} | {(p >= ACT_AT).sum()} |")
    lines += ["", "| feature | AUC, train: raised vs the rest | raised vs lowered |",
              "|---|---|---|"]
    changed = gains != 0
    for column, name in enumerate(LOOKAHEAD_FEATURES):
        lines.append(f"| {name} | {roc_auc_score(raised, X[:, column]):.3f} | "
                     f"{roc_auc_score(raised[changed], X[changed, column]):.3f} |")
    return "\n".join(lines)


async def run(dataset: BeirDataset, url: str) -> str:
    async with corpus_context(dataset, url) as context:
        train = await collect(context, dataset, "train")
        test = await collect(context, dataset, "test")
    return report(train, test)


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return np.asarray(vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True),
                                           1e-12))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--url", required=True, help="a running OpenSearch node")
    args = parser.parse_args(argv)
    print(asyncio.run(run(BeirDataset(args.dataset), args.url)))


if __name__ == "__main__":
    main()
