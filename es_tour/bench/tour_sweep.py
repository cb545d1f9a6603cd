"""One TOUR setting at a time against rerank-of-kNN and rerank-hybrid, at equal budgets.

The labeler is the default one over its cached corpus vectors (`CorpusLabeler`), so a
pair costs a dot product and a 100-query sweep takes minutes, not hours:

    python -m es_tour.bench.tour_sweep --dataset ../shared/datasets/scifact --split train \
        --url http://localhost:9200 --methods rerank:k=20,tour-hard:budget=20:explore=true
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import numpy as np

from es_tour.agents import CorpusLabeler, corpus_labeler
from es_tour.bench.retrieval import operator_counts
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.evaluation import MethodReport, evaluate, parse_methods
from es_tour.ingest import ingest
from es_tour.models import labeler_encoder, load_labeler, query_encoder
from es_tour.pipeline import SearchContext


def explored(report: MethodReport) -> float:
    """The fraction of queries that labelled a new doc after round 0."""
    results = report.results.values()
    return float(np.mean([sum(t.newly_scored for t in r.rounds[1:]) > 0 for r in results]))


@asynccontextmanager
async def corpus_context(dataset: BeirDataset, url: str, engine_name: str = "opensearch",
                         labeler_max_length: int | None = None, labeler: str = "default"
                         ) -> AsyncIterator[SearchContext]:
    """The dataset's index on the node at `url` (built if missing), searched with minilm-l6
    and labelled by `labeler` over its cached corpus vectors (the default one's of docs cut
    to `labeler_max_length` tokens when given; an ensemble's members' each)."""
    labelling = (CorpusLabeler(labeler_encoder("default", labeler_max_length), dataset)
                 if labeler_max_length else corpus_labeler(load_labeler(labeler), dataset))
    encoder = query_encoder("minilm-l6")
    async with connect(engine_name, url) as engine:
        await ingest(engine, dataset, dataset.name, encoder, if_missing=True,
                     show_progress=False)
        yield SearchContext(engine, dataset.name, encoder, labelling)


async def sweep(dataset: BeirDataset, url: str, methods: str, split: str,
                queries: int) -> list[MethodReport]:
    async with corpus_context(dataset, url) as context:
        return await evaluate(context, dataset, parse_methods(methods), split=split,
                              max_queries=queries, cold_labels=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--url", required=True, help="a running OpenSearch node")
    parser.add_argument("--methods", required=True, help="comma list of name[:key=value...]")
    parser.add_argument("--split", default="train")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    reports = asyncio.run(sweep(BeirDataset(args.dataset), args.url, args.methods, args.split,
                                args.queries))
    print("| method | nDCG@10 | R@100 | pairs/query | explored | operators chosen |")
    print("|---|---|---|---|---|---|")
    for report in reports:
        summary = report.summary()
        print(f"| `{report.spec.label}` | {summary['ndcg@10']:.4f} | "
              f"{summary['recall@100']:.4f} | "
              f"{summary['pairs_scored_mean']:.1f} | {explored(report):.2f} | "
              f"{operator_counts(report)} |")


if __name__ == "__main__":
    main()
