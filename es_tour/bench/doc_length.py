"""The labeler's doc max_length: what each length costs per new doc and what it gives in
nDCG@10, chosen on SciFact train and reported on test.

A new doc's embedding is most of a refined search's model time when the store has not seen
it (docs/benchmarks/cost.md). The default labeler (bge-small) reads 512 tokens of a doc;
a shorter doc encoding is cheaper. This measures, for each length:

- ms per new doc: a fixed sample of corpus docs embedded in the sidecar's label batches,
  the lengths interleaved and each repeated, the median taken, all in one run;
- nDCG@10 at the frontier's 20-pair choice and at `rerank-hybrid:k=20`, on train and on
  test, with the labeler over the corpus vectors of that length.

The choice is the shortest length whose train nDCG@10 is within `TOLERANCE` of the
longest's for both methods; test is reported, never chosen on:

    python -m es_tour.bench.doc_length --dataset ../shared/datasets/scifact \\
        --url http://127.0.0.1:9200 --out docs/benchmarks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.models import labeler_encoder
from es_tour.pipeline._context import DEFAULT_LABEL_BATCH
from es_tour.recommended import FRONTIER_LABEL
from onnx_models import spec

console = Console(stderr=True)
LENGTHS = (512, 384, 256)
METHODS = (FRONTIER_LABEL, "rerank-hybrid:k=20")
TOLERANCE = 0.003  # the bar: nDCG@10 within 0.003 of today's
SAMPLE_DOCS, REPEATS, SEED = 96, 3, 7
TARGET_MS = 50.0


def ms_per_doc(lengths: Sequence[int], texts: Sequence[str], repeats: int) -> dict[int, float]:
    """length -> median ms per doc over `repeats` interleaved passes over `texts`, embedded
    in the sidecar's label batches at the default labeler's precision."""
    encoders = {n: labeler_encoder("default", n) for n in lengths}
    for encoder in encoders.values():  # the first run of a session pays its set-up
        encoder.encode_docs(texts[:2])
    passes: dict[int, list[float]] = {n: [] for n in lengths}
    for _ in range(repeats):
        for n, encoder in encoders.items():
            started = time.perf_counter()
            for start in range(0, len(texts), DEFAULT_LABEL_BATCH):
                encoder.encode_docs(texts[start:start + DEFAULT_LABEL_BATCH])
            passes[n].append((time.perf_counter() - started) * 1000 / len(texts))
    return {n: statistics.median(times) for n, times in passes.items()}


async def quality(dataset: BeirDataset, url: str, length: int, split: str,
                  queries: int | None) -> dict[str, float]:
    """method label -> nDCG@10 on `split` with the labeler reading `length` tokens a doc."""
    async with corpus_context(dataset, url, labeler_max_length=length) as context:
        reports = await evaluate(context, dataset, [MethodSpec.parse(m) for m in METHODS],
                                 split=split, max_queries=queries, cold_labels=False)
    return {r.spec.label: round(r.metrics["ndcg@10"], 4) for r in reports}


def choose(train: dict[int, dict[str, float]]) -> int:
    """The shortest length within TOLERANCE of the longest on every method, on train."""
    longest = max(train)
    return min(n for n, scores in train.items()
               if all(scores[m] >= train[longest][m] - TOLERANCE for m in METHODS))


async def run(dataset: BeirDataset, url: str, queries: int | None) -> dict[str, Any]:
    docs = [doc.contents for doc in dataset.corpus()]
    sample = random.Random(SEED).sample(docs, SAMPLE_DOCS)
    timing = ms_per_doc(LENGTHS, sample, REPEATS)
    console.print(f"ms per new doc: {timing}")
    scores: dict[str, dict[int, dict[str, float]]] = {"train": {}, "test": {}}
    for length in LENGTHS:
        for split in scores:
            scores[split][length] = await quality(dataset, url, length, split, queries)
            console.print(f"{length} tokens, {split}: {scores[split][length]}")
    chosen = choose(scores["train"])
    return {"date": now(), "machine": machine(), "labeler": spec("default").name,
            "precision": spec("default").labeler_precision, "methods": list(METHODS),
            "sample_docs": SAMPLE_DOCS, "repeats": REPEATS, "batch": DEFAULT_LABEL_BATCH,
            "ms_per_doc": timing, "ndcg@10": scores, "chosen": chosen,
            "tolerance": TOLERANCE, "target_ms": TARGET_MS}


def markdown(result: dict[str, Any]) -> str:
    longest = max(result["ms_per_doc"], key=int)
    lines = [
        "# The labeler's doc max_length",
        "",
        "Written by `python -m es_tour.bench.doc_length`; never edited by hand.",
        "",
        f"- command: `{result['command']}`",
        f"- date: {result['date']}; machine: {result['machine']}",
        f"- labeler: {result['labeler']} ({result['precision']}); ms per new doc: "
        f"{result['sample_docs']} corpus docs (fixed seed) in batches of {result['batch']}, "
        f"the lengths interleaved, median of {result['repeats']} passes",
        f"- nDCG@10 with the labeler over the corpus vectors of each length; chosen on "
        f"train: the shortest within {result['tolerance']} of {longest} tokens on both "
        f"methods",
        "",
        "| max_length | ms / new doc | vs " + str(longest) + " | "
        + " | ".join(f"{m} train | test" for m in result["methods"]) + " |",
        "|---|---|---|" + "---|---|" * len(result["methods"]),
    ]
    for length, ms in result["ms_per_doc"].items():
        cells = [f"{result['ndcg@10']['train'][length][m]:.4f} | "
                 f"{result['ndcg@10']['test'][length][m]:.4f}" for m in result["methods"]]
        lines.append(f"| {length} | {ms:.1f} | {ms / result['ms_per_doc'][longest]:.2f}x | "
                     + " | ".join(cells) + " |")
    chosen = result["chosen"]
    lines += ["", f"Chosen on train: **{chosen} tokens**, "
              f"{result['ms_per_doc'][chosen]:.1f} ms per new doc against the "
              f"{result['target_ms']:.0f} ms target "
              f"({'met' if result['ms_per_doc'][chosen] <= result['target_ms'] else 'not met'})."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--url", default="http://127.0.0.1:9200", help="an OpenSearch node")
    parser.add_argument("--queries", type=int, default=None,
                        help="the first N queries of each split (default: all)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args(argv)
    result = asyncio.run(run(BeirDataset(args.dataset), args.url, args.queries))
    result["command"] = portable_command("python -m es_tour.bench.doc_length",
                                         sys.argv[1:] if argv is None else argv)
    # JSON keys are strings; the page reads lengths back as they were measured
    saved = json.loads(json.dumps(result))
    (args.out / "doc-length.json").write_text(json.dumps(saved, indent=2) + "\n")
    (args.out / "doc-length.md").write_text(markdown(result))
    print(f"wrote {args.out / 'doc-length.md'}")


if __name__ == "__main__":
    main()
