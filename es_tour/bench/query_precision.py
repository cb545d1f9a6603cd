"""What the retriever's query precision costs and changes: CPU per query embedding on its
fp32 and int8 graphs, and the SciFact test rankings each gives (docs/benchmarks/
query-precision.md).

    python -m es_tour.bench.query_precision --dataset ../shared/datasets/scifact \
        --index scifact

Queries are embedded one at a time on one thread, as a search embeds its own; the two
graphs take turns pass by pass and each query's median of three passes is kept, so drifts
in machine load hit both alike. Rankings come from `es-tour eval`'s code on the index (it
must hold the dataset, as `es-tour index` builds it), labelled by the default labeler's
cached corpus vectors: the same φ a search computes.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.bench._commands import bench_parser, parsed_command, write_report
from es_tour.bench._machine import machine, now
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.models import (
    QUERY_THREADS,
    DualEncoder,
    load_labeler,
    model_path,
    query_encoder,
)
from es_tour.pipeline import open_context
from es_tour.recommended import FRONTIER_LABEL
from onnx_models import RETRIEVER

PASSES = 3
# the labeler-free pools, and the budget frontier's choices with the default labeler at
# 10, 20 and 40 pairs (docs/benchmarks/frontier.md)
METHODS = ("knn", "hybrid-linear",
           "rerank:k=10:first_stage=hybrid-linear:w_bm25=0.5:w_dense=0.1", FRONTIER_LABEL,
           "hybrid-tour:budget=40:k=10:pool=hybrid-linear:lexical=none:w_bm25=0.2:w_dense=0.0")
MOVED = 0.01  # a query's nDCG@10 counts as moved past this


def cpu_ms_per_query(encoders: dict[str, DualEncoder], texts: Sequence[str]
                     ) -> dict[str, float]:
    """Precision -> the median over `texts` of each query's median CPU ms of PASSES."""
    runs: dict[str, list[list[float]]] = {name: [] for name in encoders}
    for encoder in encoders.values():
        encoder.encode_queries(list(texts[:2]))  # onnxruntime's first run allocates
    for number in range(PASSES):
        order = list(encoders) if number % 2 == 0 else list(reversed(encoders))
        for name in order:
            timed = []
            for text in texts:
                started = time.process_time()
                encoders[name].encode_queries([text])
                timed.append((time.process_time() - started) * 1000)
            runs[name].append(timed)
    return {name: round(statistics.median(statistics.median(per_query)
                                          for per_query in zip(*passes, strict=True)), 2)
            for name, passes in runs.items()}


async def rankings(engine: str, url: str, index: str, data: BeirDataset,
                   encoder: DualEncoder) -> dict[str, dict[str, float]]:
    """Method label -> qid -> nDCG@10 on the test split, with `encoder` embedding queries."""
    from es_tour.agents import corpus_labeler

    context = open_context(engine, url, index)
    context.encoder = encoder
    context.labeler = corpus_labeler(load_labeler("default"), data)
    context.query_vectors = {}
    qrels = data.qrels("test")
    async with context.engine:
        reports = await evaluate(context, data, [MethodSpec.parse(m) for m in METHODS],
                                 split="test", cold_labels=False)
    return {report.spec.label: report.ndcg_by_query(qrels) for report in reports}


def compare(fp32: dict[str, float], int8: dict[str, float]) -> dict[str, Any]:
    """One method's nDCG@10 with each query precision, and the queries that moved."""
    gains = np.array([int8[qid] - fp32[qid] for qid in fp32])
    return {"fp32": round(float(np.mean(list(fp32.values()))), 4),
            "int8": round(float(np.mean(list(int8.values()))), 4),
            "better": int(np.sum(gains > MOVED)), "worse": int(np.sum(gains < -MOVED))}


def markdown(report: dict[str, Any]) -> str:
    cpu, cosine = report["cpu_ms_per_query"], report["cosine"]
    lines = [
        "# Query precision: the retriever's query embedding at fp32 and int8", "",
        f"Run {report['date']} on {report['machine']}:", "", "```bash",
        report["command"], "```", "",
        "A search embeds its query for its kNN legs with the index's query encoder. For "
        f"the registry's retriever ({RETRIEVER}) that runs on its int8 graph, whatever graph "
        "embedded the index's docs (docs/models.md, \"Query and doc precision\").", "",
        f"## CPU per query ({report['queries']} {report['dataset']} test queries, one at a "
        "time, one thread)", "",
        "| graph | CPU ms per query | × fp32 |", "|---|---|---|",
        *[f"| {name} | {ms} | {ms / cpu['fp32']:.2f}× |" for name, ms in cpu.items()], "",
        f"Cosine of each int8 query vector to its fp32 one: mean {cosine['mean']}, lowest "
        f"{cosine['min']}.", "",
        f"## Rankings ({report['dataset']} test, nDCG@10)", "",
        f"Queries better or worse by more than {MOVED} with int8 queries than with fp32.", "",
        "| method | fp32 queries | int8 queries | Δ | better / worse |",
        "|---|---|---|---|---|",
        *[f"| `{label}` | {row['fp32']:.4f} | {row['int8']:.4f} | "
          f"{row['int8'] - row['fp32']:+.4f} | {row['better']} / {row['worse']} |"
          for label, row in report["rankings"].items()], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, engines=("opensearch",))
    parser.add_argument("--index", default=None, help="default: the dataset's name")
    parser.add_argument("--output", type=Path,
                        default=Path("docs/benchmarks/query-precision.md"))
    args = parser.parse_args(argv)
    data = BeirDataset(args.dataset)
    texts = list(data.queries("test").values())
    # the registry's query encoder (int8 queries) beside the same model's fp32 graph
    encoders = {"fp32": DualEncoder(model_path(RETRIEVER), threads=QUERY_THREADS),
                "int8": query_encoder(RETRIEVER)}
    vectors = {name: encoder.encode_queries(texts) for name, encoder in encoders.items()}
    cosines = np.sum(vectors["fp32"] * vectors["int8"], axis=1)
    index = args.index or data.name
    by_precision = {name: asyncio.run(rankings("opensearch", args.opensearch, index, data,
                                               encoder))
                    for name, encoder in encoders.items()}
    report = {
        "date": now(), "machine": machine(), "dataset": data.name, "queries": len(texts),
        "command": parsed_command("python -m es_tour.bench.query_precision", args, parser),
        "cpu_ms_per_query": cpu_ms_per_query(encoders, texts),
        "cosine": {"mean": round(float(cosines.mean()), 4),
                   "min": round(float(cosines.min()), 4)},
        "rankings": {label: compare(by_precision["fp32"][label], by_precision["int8"][label])
                     for label in METHODS},
    }
    write_report(args.output, markdown(report), report)


if __name__ == "__main__":
    main()
