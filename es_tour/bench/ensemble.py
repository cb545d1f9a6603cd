"""Ensembles of the registry's dual encoders as labelers, each member's scores standardised
two ways (per query, or by the member's spread fixed on train), reranking one labelled
pool: each member's spread (`models._ensemble.SPREADS`), and what an ensemble adds alone
and beside final-score fusion. Choices on train, test reported:

    python -m es_tour.bench.ensemble --dataset ../shared/datasets/scifact \\
        --url http://127.0.0.1:9200 --output docs/benchmarks/ensemble.md
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from es_tour.bench._commands import parsed_command
from es_tour.bench._machine import machine, now
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.metrics import ranked, score_run
from es_tour.models import labeler_encoder
from es_tour.models._corpus_cache import unit_corpus_embeddings
from es_tour.tour import fused_scores
from es_tour.tuning import GRID, MEMBER_FIT_METHOD, MEMBER_GRID, Pool, plain_spec, pools

MODELS = ("bge-small-en-v1.5", "e5-small-v2", "minilm-l6")
BUDGET = 20
Scores = dict[str, dict[str, np.ndarray]]  # query id -> model -> its scores of the pool


def member_scores(dataset: BeirDataset, found: Mapping[str, Pool], queries: Mapping[str, str],
                  models: Sequence[str]) -> Scores:
    """Each model's cosine of each query with each doc of its pool, from corpus vectors."""
    texts = [doc.contents for doc in dataset.corpus()]
    row = {doc.id: i for i, doc in enumerate(dataset.corpus())}
    out: Scores = {qid: {} for qid in found}
    for model in models:
        encoder = labeler_encoder(model)
        vectors = unit_corpus_embeddings(encoder, dataset.root / "corpus.jsonl", texts)
        embedded = np.asarray(encoder.encode_queries([queries[qid] for qid in found]))
        embedded /= np.linalg.norm(embedded, axis=1, keepdims=True)
        for (qid, pool), q in zip(found.items(), embedded, strict=True):
            out[qid][model] = vectors[[row[i] for i in pool.ids]] @ q
    return out


def spreads(scores: Scores, models: Sequence[str]) -> dict[str, float]:
    """Each model's mean within-query standard deviation of its scores."""
    return {m: round(float(np.mean([s[m].std() for s in scores.values()])), 4) for m in models}


def combine(scores: Mapping[str, np.ndarray], subset: Sequence[str],
            weights: Sequence[float], way: str, spread: Mapping[str, float]) -> np.ndarray:
    """The ensemble's φ of one pool: each member's scores z-scored over the pool ("per
    query") or divided by its spread ("by spread"), weighted and summed."""
    standard = [(s - s.mean()) / (s.std() + 1e-9) if way == "per query" else s / spread[m]
                for m in subset for s in (scores[m],)]
    return np.asarray(np.asarray(weights) @ np.stack(standard))


Split = tuple[Mapping[str, Pool], Scores, Mapping[str, Mapping[str, int]]]


def ndcg(split: Split, subset: Sequence[str], weights: Sequence[float], way: str,
         spread: Mapping[str, float], w_bm25: float = 0.0, w_dense: float = 0.0) -> float:
    found, scores, qrels = split
    run = {}
    for qid, pool in found.items():
        phi = combine(scores[qid], subset, weights, way, spread)
        fused = fused_scores(phi, pool.bm25, pool.dense, w_bm25, w_dense)
        run[qid] = ranked([pool.ids[i] for i in np.argsort(-fused, kind="stable")] + pool.rest)
    return score_run(qrels, run)["ndcg@10"]


def row(splits: Mapping[str, Split], subset: Sequence[str], way: str,
        spread: Mapping[str, float]) -> str:
    """Member weights fitted on train (φ alone), then fusion weights, both reported."""
    train = splits["train"]
    grid = [(1.0, *rest) for rest in itertools.product(MEMBER_GRID[1:],
                                                       repeat=len(subset) - 1)]
    weights = max(grid, key=lambda ws: ndcg(train, subset, ws, way, spread))
    fusion = max(itertools.product(GRID, GRID),
                 key=lambda wf: ndcg(train, subset, weights, way, spread, *wf))
    alone = [ndcg(splits[s], subset, weights, way, spread) for s in ("train", "test")]
    fused = [ndcg(splits[s], subset, weights, way, spread, *fusion) for s in ("train", "test")]
    return (f"| {' + '.join(subset)} | {way} | {weights} | {alone[0]:.4f} / {alone[1]:.4f} "
            f"| {fusion}: {fused[0]:.4f} / {fused[1]:.4f} |")


async def measure(dataset: BeirDataset, url: str, models: Sequence[str]) -> list[str]:
    splits: dict[str, Split] = {}
    for split in ("train", "test"):
        queries = dataset.queries(split)
        async with corpus_context(dataset, url) as context:
            found = await pools(context, plain_spec(MEMBER_FIT_METHOD, BUDGET), queries)
        splits[split] = (found, member_scores(dataset, found, queries, models),
                         dataset.qrels(split))
    spread = spreads(splits["train"][1], models)
    lines = [f"Each model's spread on train (mean within-query std of φ): {spread}", "",
             "| labeler | standardised | member weights fitted on train | φ alone: train / "
             "test | fused (w_bm25, w_dense fitted): train / test |", "|---|---|---|---|---|"]
    subsets = [c for r in range(1, len(models) + 1) for c in itertools.combinations(models, r)]
    for subset in subsets:
        ways = ("by spread",) if len(subset) == 1 else ("per query", "by spread")
        lines += [row(splits, subset, way, spread) for way in ways]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--url", default="http://127.0.0.1:9200")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/ensemble.md"))
    args = parser.parse_args(argv)
    lines = asyncio.run(measure(BeirDataset(args.dataset), args.url, args.models.split(",")))
    args.output.write_text("\n".join([
        "# Ensemble labelers on one pool", "",
        f"- command: `{parsed_command('python -m es_tour.bench.ensemble', args, parser)}`",
        f"- date: {now()}; machine: {machine()}",
        f"- pool: `{MEMBER_FIT_METHOD}` at {BUDGET} pairs (its labelled docs do not depend on "
        "the labeler's scores); SciFact train chooses, test reports", "", *lines, ""]))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
