"""The labeler's doc max_length: what each length costs per new doc and what it gives in
nDCG@10, chosen on SciFact train and reported on test.

A new doc's embedding is most of a refined search's model time when the store has not seen
it (docs/benchmarks/cost.md). The default labeler (bge-small) reads 512 tokens of a doc;
a shorter doc encoding is cheaper. This measures, for each length:

- ms per new doc, as `python -m es_tour.bench.doc_cost` measures it (no engine needed);
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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import now
from es_tour.bench.doc_cost import LENGTHS, measure
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.recommended import FRONTIER_LABEL

console = Console(stderr=True)
METHODS = (FRONTIER_LABEL, "rerank-hybrid:k=20")
TOLERANCE = 0.003  # a shorter length is chosen if nDCG@10 is within this of the longest's


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
    cost = measure(dataset)
    console.print(f"ms per new doc: {cost['ms_per_doc']}")
    scores: dict[str, dict[int, dict[str, float]]] = {"train": {}, "test": {}}
    for length in LENGTHS:
        for split in scores:
            scores[split][length] = await quality(dataset, url, length, split, queries)
            console.print(f"{length} tokens, {split}: {scores[split][length]}")
    chosen = choose(scores["train"])
    timing = {key: cost[key] for key in ("machine", "labeler", "precision", "sample_docs",
                                         "repeats", "batch", "ms_per_doc")}
    return {"date": now(), **timing, "methods": list(METHODS), "ndcg@10": scores, "chosen": chosen,
            "tolerance": TOLERANCE}


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
        f"{result['sample_docs']} corpus docs (fixed seed), {result['batch']} a model run, "
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
              f"{result['ms_per_doc'][chosen]:.1f} ms per new doc."]
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
