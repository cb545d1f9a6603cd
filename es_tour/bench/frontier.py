"""The budget frontier: each labelling method at each labeler budget, plain and with
final-score fusion, on both engines, with verdicts against the two plain rerankers.

Fusion weights are fitted per (method, budget) on train queries on the first engine
(`fusion.fit`); every reported figure is SciFact test. The labeler is the default one over
its cached corpus vectors, so the run takes minutes:

    python -m es_tour.bench.frontier --dataset ../shared/datasets/scifact \\
        --opensearch http://127.0.0.1:9200 --elasticsearch http://127.0.0.1:9210 \\
        --out docs/benchmarks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server
import matplotlib.pyplot as plt
from rich.console import Console

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench.retrieval import ndcg_per_round, operator_counts
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import evaluate, progress_bar
from es_tour.tuning import BASELINE, CANDIDATES, fit, fused_spec, plain_spec, pools

console = Console(stderr=True)
BUDGETS = (10, 20, 40)
BASELINES = ("rerank", BASELINE)  # rerank-of-kNN and rerank-hybrid
METHODS = CANDIDATES
TARGET = 0.01  # the bar: the best method ≥ rerank-hybrid + 1.0 nDCG@10 points


async def fit_weights(dataset: BeirDataset, url: str, train_queries: int | None,
                      fitted: Mapping[str, tuple[float, float, float]]
                      ) -> dict[str, tuple[float, float, float]]:
    """plain label -> (w_bm25, w_dense, train nDCG@10 fused), fitted on train queries for
    the labels `fitted` lacks."""
    train = dict(list(dataset.queries("train").items())[:train_queries])
    qrels = dataset.qrels("train")
    weights = dict(fitted)
    async with corpus_context(dataset, url) as context:
        for budget in BUDGETS:
            for name in METHODS:
                spec = plain_spec(name, budget)
                if spec.label in weights:
                    continue
                weights[spec.label] = fit(await pools(context, spec, train), qrels)
                console.print(f"fitted {spec.label}: {weights[spec.label]}")
    return weights


async def measure(dataset: BeirDataset, engine: str, url: str,
                  weights: Mapping[str, tuple[float, float, float]], test_queries: int | None,
                  methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """plain or fused label -> nDCG@10, R@100, pairs, per-round nDCG@10, operators, for
    each of `methods` at each budget."""
    specs, method_of = [], {}
    for budget in BUDGETS:
        for name in methods:
            spec = plain_spec(name, budget)
            w_bm25, w_dense, _ = weights[spec.label]
            for each in (spec, fused_spec(spec, w_bm25, w_dense)):
                specs.append(each)
                method_of[each.label] = name
    qrels = dataset.qrels("test")
    total = len(specs) * len(list(dataset.queries("test"))[:test_queries])
    async with corpus_context(dataset, url, engine) as context:
        version = await context.engine.version()
        with progress_bar(f"{engine} test", total, console) as advance:
            reports = await evaluate(context, dataset, specs, split="test",
                                     max_queries=test_queries, cold_labels=False,
                                     on_query=advance)
    by_label: dict[str, dict[str, Any]] = {}
    for report in reports:
        summary = report.summary()
        by_label[report.spec.label] = {
            "method": method_of[report.spec.label], "name": report.spec.name,
            "budget": report.spec.budget,
            "fused": "w_bm25" in report.spec.options,
            "ndcg@10": summary["ndcg@10"], "recall@100": summary["recall@100"],
            "pairs_scored_mean": summary["pairs_scored_mean"],
            "ndcg@10_per_round": ndcg_per_round(report, qrels),
            "operators": operator_counts(report),
        }
    return {"version": version, "methods": by_label}


def verdicts(methods: Mapping[str, Mapping[str, Any]],
             weights: Mapping[str, Sequence[float]]) -> list[str]:
    """Per budget: the method with the best train nDCG@10 (fused with its fitted weights)
    against rerank-of-kNN and rerank-hybrid, both plain, on test."""
    lines = []
    for budget in BUDGETS:
        plain = {name: plain_spec(name, budget) for name in METHODS}
        knn, hybrid = (methods[plain[name].label] for name in BASELINES)
        chosen = max(METHODS, key=lambda name: weights[plain[name].label][2])
        w_bm25, w_dense, train = weights[plain[chosen].label]
        label = fused_spec(plain[chosen], w_bm25, w_dense).label
        best = methods[label]
        gain = best["ndcg@10"] - hybrid["ndcg@10"]
        met = gain >= TARGET and best["recall@100"] >= hybrid["recall@100"]
        lines.append(
            f"- **{budget} pairs:** chosen on train ({train:.4f}): `{label}`, test "
            f"{best['ndcg@10']:.4f}: {best['ndcg@10'] - knn['ndcg@10']:+.4f} over "
            f"rerank-of-kNN, {gain:+.4f} over rerank-hybrid (R@100 {best['recall@100']:.4f} "
            f"against {hybrid['recall@100']:.4f}); the +{TARGET:.2f} target is "
            f"{'met' if met else 'not met'}.")
    return lines


def markdown(collected: Mapping[str, Any]) -> str:
    engines = collected["engines"]
    lines = ["# The budget frontier", "",
             "Written by `python -m es_tour.bench.frontier` (and `make bench-frontier`); never "
             "edited by hand.", "",
             f"- command: `{collected['command']}`",
             *([f"- fusion weights fitted by: `{collected['fit_command']}`"]
               if "fit_command" in collected else []),
             f"- date: {collected['date']}; machine: {collected['machine']}",
             *[f"- then {', '.join(f'`{m}`' for m in added['methods'])} added on "
               f"{added['date']} (weights fitted and test measured only for them): "
               f"`{added['command']}`" for added in collected.get("added", [])],
             f"- SciFact test, {collected['test_queries']} queries; fusion weights fitted on "
             f"the first {collected['train_queries']} train queries",
             "- labeler: the default dual encoder over its cached corpus vectors; retriever "
             "minilm-l6", "",
             "Each method is capped at the budget (labeler pairs per query). *Fused* reranks "
             "the labelled docs by z(φ) + w_bm25·z(BM25) + w_dense·z(kNN score), weights "
             "from train (`w_bm25`, `w_dense` options).", ""]
    for engine, result in engines.items():
        methods = result["methods"]
        lines += [f"## {engine} {result['version']}", "",
                  "| budget | method | nDCG@10 plain | fused | R@100 plain | fused "
                  "| pairs/query | w_bm25, w_dense (train nDCG@10 fused) |",
                  "|---|---|---|---|---|---|---|---|"]
        for budget in BUDGETS:
            for name in METHODS:
                plain = plain_spec(name, budget)
                w_bm25, w_dense, train = collected["weights"][plain.label]
                p = methods[plain.label]
                f = methods[fused_spec(plain, w_bm25, w_dense).label]
                lines.append(f"| {budget} | `{plain.label}` | {p['ndcg@10']:.4f} | "
                             f"{f['ndcg@10']:.4f} | {p['recall@100']:.4f} | "
                             f"{f['recall@100']:.4f} | {p['pairs_scored_mean']:.1f} | "
                             f"{w_bm25}, {w_dense} ({train:.4f}) |")
        lines += ["", "**Verdicts** (the method is chosen by its fused train nDCG@10):", "",
                  *verdicts(methods, collected["weights"]), ""]
    first = next(iter(engines.values()))["methods"]
    per_round = {label: m["ndcg@10_per_round"] for label, m in first.items()
                 if not m["fused"] and len(m["ndcg@10_per_round"]) > 1}
    columns = max(map(len, per_round.values()), default=1)
    lines += ["## nDCG@10 per round (first engine, plain)", "",
              "| method | round 0 | " + " | ".join(map(str, range(1, columns))) + " |",
              "|---|" + "---|" * columns]
    for label, rounds in per_round.items():
        cells = [f"{v:.4f}" for v in rounds] + [""] * (columns - len(rounds))
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    lines += ["", "## Δq operators chosen (first engine, plain)", "",
              "| method | operators |", "|---|---|"]
    lines += [f"| `{label}` | {m['operators']} |" for label, m in first.items()
              if m["operators"] and not m["fused"]]
    lines += ["", "![nDCG@10 against the budget](../img/frontier-budgets.png)", ""]
    return "\n".join(lines)


def plot(methods: Mapping[str, Mapping[str, Any]], path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for name in METHODS:
        for fused in (False, True):
            points = [(m["budget"], m["ndcg@10"]) for m in methods.values()
                      if m["method"] == name and m["fused"] == fused]
            ax.plot(*zip(*sorted(points), strict=True), marker="o",
                    linestyle="--" if fused else "-", label=f"{name}{' fused' if fused else ''}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(BUDGETS, [str(b) for b in BUDGETS])
    ax.set_xlabel("labeler pairs per query (budget)")
    ax.set_ylabel("nDCG@10")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


async def run(dataset: BeirDataset, urls: Mapping[str, str], train_queries: int | None,
              test_queries: int | None,
              fitted: Mapping[str, tuple[float, float, float]] | None = None,
              methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """Fit on train the weights `fitted` lacks, then measure `methods` on test."""
    first_url = next(iter(urls.values()))
    weights = await fit_weights(dataset, first_url, train_queries, fitted or {})
    engines = {engine: await measure(dataset, engine, url, weights, test_queries, methods)
               for engine, url in urls.items()}
    return {"date": now(), "machine": machine(), "weights": weights, "engines": engines,
            "train_queries": len(list(dataset.queries("train"))[:train_queries]),
            "test_queries": len(list(dataset.queries("test"))[:test_queries])}


def merge(previous: Mapping[str, Any], new: Mapping[str, Any], methods: Sequence[str],
          command: str) -> dict[str, Any]:
    """`previous` with `new`'s weights and its measurements of `methods` on each engine,
    the addition recorded beside the run it joins."""
    engines = {engine: {**result, "methods": {**result["methods"],
                                              **new["engines"][engine]["methods"]}}
               for engine, result in previous["engines"].items()}
    record = {"methods": list(methods), "date": new["date"], "command": command}
    return {**previous, "weights": new["weights"], "engines": engines,
            "added": [*previous.get("added", []), record]}


def write(collected: dict[str, Any], out: Path, images: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    first = next(iter(collected["engines"]))
    plot(collected["engines"][first]["methods"], images / "frontier-budgets.png",
         f"SciFact test on {first}: nDCG@10 by labeler budget")
    (out / "frontier.json").write_text(json.dumps(collected, indent=1))
    path = out / "frontier.md"
    path.write_text(markdown(collected))
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--opensearch", default="http://127.0.0.1:9200")
    parser.add_argument("--elasticsearch", default="http://127.0.0.1:9210")
    parser.add_argument("--train-queries", type=int, default=None, help="default: all")
    parser.add_argument("--test-queries", type=int, default=None, help="default: all")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--rerender", action="store_true",
                        help="only rewrite the page and plot from <out>/frontier.json")
    parser.add_argument("--reuse-weights", action="store_true",
                        help="measure test again with the weights <out>/frontier.json fitted "
                             "(and its train query count), fitting only methods it lacks")
    parser.add_argument("--add", default=None, metavar="METHOD[,METHOD]",
                        help="with --reuse-weights: measure only these METHODS entries (new "
                             "ones) and keep <out>/frontier.json's other measurements")
    args = parser.parse_args(argv)
    added = tuple(args.add.split(",")) if args.add else ()
    if added and not args.reuse_weights:
        parser.error("--add needs --reuse-weights: it keeps the measurements already made")
    if unknown := [name for name in added if name not in METHODS]:
        parser.error(f"--add takes entries of METHODS, not {unknown}")
    previous = (json.loads((args.out / "frontier.json").read_text())
                if args.rerender or args.reuse_weights else None)
    command = portable_command("python -m es_tour.bench.frontier",
                               sys.argv[1:] if argv is None else argv)
    if args.rerender and previous is not None:
        collected = previous
    else:
        urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
        fitted = previous["weights"] if previous else None
        train_queries = previous["train_queries"] if previous else args.train_queries
        collected = asyncio.run(run(BeirDataset(args.dataset), urls, train_queries,
                                    args.test_queries, fitted, added or METHODS))
        collected["command"] = command
        if previous:
            collected["fit_command"] = previous.get("fit_command", previous["command"])
        if added and previous:
            collected = merge(previous, collected, added, command)
    print(f"wrote {write(collected, args.out, args.out.parent / 'img')}")


if __name__ == "__main__":
    main()
