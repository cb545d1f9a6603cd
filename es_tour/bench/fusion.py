"""Fit final-score fusion weights on train, then report each method plain and fused on test.

Each method runs once per train query, and the weights (w_bm25, w_dense) with the best
train nDCG@10 on a grid are chosen (`es_tour.tuning.fit`). The test rows come from the
shipped path, `name:...:w_bm25=..:w_dense=..`:

    python -m es_tour.bench.fusion --dataset ../shared/datasets/scifact \\
        --url http://localhost:9200 --methods rerank-hybrid:k=20,tour-hard:budget=20
"""

from __future__ import annotations

import argparse
import asyncio

from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import RUN_DEPTH, MethodSpec, evaluate, parse_methods
from es_tour.metrics import score_run
from es_tour.tuning import fit, pools


async def fit_and_report(dataset: BeirDataset, url: str, methods: str, train_queries: int | None,
                         test_queries: int) -> None:
    train = dataset.queries("train")
    train = dict(list(train.items())[:train_queries])
    async with corpus_context(dataset, url) as context:
        print("| method | train nDCG@10 plain → fused | w_bm25 | w_dense "
              "| test nDCG@10 plain | fused | test R@100 plain | fused |")
        print("|---|---|---|---|---|---|---|---|")
        for spec in parse_methods(methods):
            found = await pools(context, spec, train)
            w_bm25, w_dense, fused_train = fit(found, dataset.qrels("train"))
            base = score_run(dataset.qrels("train"), {
                qid: {doc: float(RUN_DEPTH - r) for r, doc in enumerate(p.ranking(0, 0))}
                for qid, p in found.items()})["ndcg@10"]
            fused = MethodSpec(f"{spec.label}:w_bm25={w_bm25}:w_dense={w_dense}", spec.name,
                               {**spec.options, "w_bm25": w_bm25, "w_dense": w_dense})
            reports = await evaluate(context, dataset, [spec, fused], split="test",
                                     max_queries=test_queries, cold_labels=False)
            (p, f) = (r.metrics for r in reports)
            print(f"| `{spec.label}` | {base:.4f} → {fused_train:.4f} | {w_bm25} | {w_dense} "
                  f"| {p['ndcg@10']:.4f} | {f['ndcg@10']:.4f} "
                  f"| {p['recall@100']:.4f} | {f['recall@100']:.4f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--url", required=True, help="a running OpenSearch node")
    parser.add_argument("--methods", required=True, help="comma list of name[:key=value...]")
    parser.add_argument("--train-queries", type=int, default=None, help="default: all")
    parser.add_argument("--test-queries", type=int, default=300)
    args = parser.parse_args(argv)
    asyncio.run(fit_and_report(BeirDataset(args.dataset), args.url, args.methods,
                               args.train_queries, args.test_queries))


if __name__ == "__main__":
    main()
