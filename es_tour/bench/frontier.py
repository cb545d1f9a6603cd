"""The budget frontier: each labelling method at each labeler budget, plain and with
final-score fusion, with each candidate labeler, and per budget the method chosen on train
against the two plain rerankers.

An ensemble candidate's member weights are fitted first, on train (`tuning.fit_members`).
Fusion weights are then fitted per (labeler, method, budget) on train queries on the first
engine; every reported figure is SciFact test. The labeler whose best method fits train best
at 20 pairs is the chosen one: it is measured on both engines, the others on the first.
hybrid-linear, which labels nothing, is measured beside them on test: each method's
robustness is its index (wins − losses) / queries and its share of queries hurt by 0.2
nDCG@10 or more against it. Labels come from each model's cached corpus vectors, so a pair
costs a dot product:

    python -m es_tour.bench.frontier --dataset ../shared/datasets/scifact \\
        --opensearch http://127.0.0.1:9200 --elasticsearch http://127.0.0.1:9210 \\
        --out docs/benchmarks
"""

from __future__ import annotations

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

from es_tour.bench._commands import bench_parser, portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench.retrieval import ndcg_per_round, operator_counts
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodReport, MethodSpec, evaluate, progress_bar
from es_tour.metrics import robustness
from es_tour.models import WEIGHT_MARK, is_ensemble
from es_tour.training._corpus import judged_apart
from es_tour.training._query_tower import train_parts
from es_tour.tuning import (
    BASELINE,
    CANDIDATES,
    MEMBER_FIT_METHOD,
    fit,
    fit_members,
    fused_spec,
    plain_spec,
    pools,
    weighted_labeler,
)

console = Console(stderr=True)
BUDGETS = (10, 20, 40)
METHODS = CANDIDATES
# the labelers to choose from: the default one alone, ensembles of the registry's dual
# encoders (their member weights fitted on train), and the default with its query tower
# tuned on SciFact train (`make tuned-labeler`, docs/models.md)
LABELERS = ("bge-small-en-v1.5", "bge-small-en-v1.5+e5-small-v2",
            "bge-small-en-v1.5+e5-small-v2+minilm-l6", "bge-small-en-v1.5-scifact-queries")
CHOICE_BUDGET = 20  # the budget whose train fit chooses the labeler
# what the robustness columns compare with: the pool the hybrid methods refine, no labeler
REFERENCE = "hybrid-linear"
FEEDBACK = "relevance-feedback"  # the market's closest peer (Qdrant's relevance feedback)
# the frontier's test nDCG@10 before ensembles (docs/benchmarks/frontier.md, 2026-11-25):
# what the stronger labelers are compared with
BEFORE = {10: 0.7301, 20: 0.7359, 40: 0.7310}


async def fit_labeler(dataset: BeirDataset, url: str, train_queries: int | None,
                      labeler: str) -> dict[str, Any]:
    """`labeler` as measured: an ensemble that names no weights with its member weights
    fitted on train queries (the pools of `MEMBER_FIT_METHOD` at `CHOICE_BUDGET`); one
    that names them, or a single model, as it is."""
    if not is_ensemble(labeler) or WEIGHT_MARK in labeler:
        return {"candidate": labeler, "name": labeler}
    train = dict(list(dataset.queries("train").items())[:train_queries])
    async with corpus_context(dataset, url, labeler=labeler) as context:
        found = await pools(context, plain_spec(MEMBER_FIT_METHOD, CHOICE_BUDGET), train)
    weights, ndcg = fit_members(found, dataset.qrels("train"))
    name = weighted_labeler(labeler, weights)
    console.print(f"fitted {labeler}: {name} (train nDCG@10 {ndcg:.4f})")
    return {"candidate": labeler, "name": name, "member_weights": list(weights),
            "member_fit_ndcg@10": ndcg}


async def fit_weights(dataset: BeirDataset, url: str, train_queries: int | None,
                      fitted: Mapping[str, tuple[float, float, float]], labeler: str,
                      methods: Sequence[str] = METHODS
                      ) -> dict[str, tuple[float, float, float]]:
    """plain label -> (w_bm25, w_dense, train nDCG@10 fused) with `labeler`, fitted on
    train queries for the labels `fitted` lacks."""
    train = dict(list(dataset.queries("train").items())[:train_queries])
    qrels = dataset.qrels("train")
    weights = dict(fitted)
    specs = [spec for budget in BUDGETS for name in methods
             if (spec := plain_spec(name, budget)).label not in weights]
    found: dict[str, dict[str, Any]] = {spec.label: {} for spec in specs}
    # a labeler tuned on train labels each train query with the fold tower that never saw it
    for part, queries in train_parts(labeler, list(train)):
        async with corpus_context(dataset, url, labeler=part) as context:
            for spec in specs:
                found[spec.label].update(
                    await pools(context, spec, {q: train[q] for q in queries}))
    for spec in specs:
        weights[spec.label] = fit(found[spec.label], qrels)
        console.print(f"fitted {spec.label}: {weights[spec.label]}")
    return weights


async def measure(dataset: BeirDataset, engine: str, url: str,
                  weights: Mapping[str, tuple[float, float, float]], test_queries: int | None,
                  methods: Sequence[str] = METHODS, labeler: str = "default"
                  ) -> dict[str, Any]:
    """plain or fused label -> nDCG@10, R@100, pairs, per-round nDCG@10, operators, and
    per-query nDCG@10, for each of `methods` at each budget, labelled by `labeler`."""
    specs, method_of = [], {}
    for budget in BUDGETS:
        for name in methods:
            spec = plain_spec(name, budget)
            w_bm25, w_dense, _ = weights[spec.label]
            for each in (spec, fused_spec(spec, w_bm25, w_dense)):
                specs.append(each)
                method_of[each.label] = name
    qrels = dataset.qrels("test")
    specs.append(MethodSpec.parse(REFERENCE))
    total = len(specs) * len(list(dataset.queries("test"))[:test_queries])
    async with corpus_context(dataset, url, engine, labeler=labeler) as context:
        version = await context.engine.version()
        with progress_bar(f"{engine} test", total, console) as advance:
            *reports, reference = await evaluate(context, dataset, specs, split="test",
                                                 max_queries=test_queries,
                                                 cold_labels=False, on_query=advance)
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
            "ndcg@10_per_query": {qid: round(v, 4) for qid, v
                                  in report.ndcg_by_query(qrels).items()},
        }
    return {"version": version, "methods": by_label,
            "reference": reference_of(reference, qrels)}


def reference_of(report: MethodReport, qrels: Mapping[str, Mapping[str, int]]
                 ) -> dict[str, Any]:
    """The robustness columns' reference, as measured: its per-query nDCG@10."""
    return {"label": report.spec.label, "date": now(),
            "ndcg@10": report.summary()["ndcg@10"],
            "ndcg@10_per_query": {qid: round(v, 4)
                                  for qid, v in report.ndcg_by_query(qrels).items()}}


async def measure_reference(dataset: BeirDataset, engine: str, url: str,
                            test_queries: int | None) -> dict[str, Any]:
    """`REFERENCE` alone on test on `engine` (it labels nothing)."""
    async with corpus_context(dataset, url, engine) as context:
        reports = await evaluate(context, dataset, [MethodSpec.parse(REFERENCE)],
                                 split="test", max_queries=test_queries, cold_labels=False)
    return reference_of(reports[0], dataset.qrels("test"))


def robustness_cells(measured: Mapping[str, Any], reference: Mapping[str, Any] | None
                     ) -> str:
    """`index, hurt share` of a measured method against the reference; – without one, or
    for a method measured before per-query figures were kept."""
    if reference is None or "ndcg@10_per_query" not in measured:
        return "–"
    against = robustness(measured["ndcg@10_per_query"], reference["ndcg@10_per_query"])
    return f"{against.index:+.3f}, {against.hurt_share:.1%}"


RESULTS_HEADING = "## The budget frontier"
RESULTS_IMAGE = "![nDCG@10 against the budget](img/frontier-budgets.png)"


def measured_methods(methods: Mapping[str, Any]) -> list[str]:
    """The candidate methods a run measured (a run may leave some out)."""
    return [name for name in METHODS if plain_spec(name, BUDGETS[0]).label in methods]


def chosen_per_budget(methods: Mapping[str, Mapping[str, Any]],
                      weights: Mapping[str, Sequence[float]],
                      measured: Sequence[str] = METHODS,
                      reference: Mapping[str, Any] | None = None) -> list[str]:
    """Per budget: the method with the best train nDCG@10 (fused with its fitted weights)
    against rerank-hybrid (and rerank-of-kNN when measured), both plain, on test; and,
    given the reference's measurement, its robustness against it."""
    lines = []
    for budget in BUDGETS:
        plain = {name: plain_spec(name, budget) for name in measured}
        hybrid = methods[plain[BASELINE].label]
        chosen = max(measured, key=lambda name: weights[plain[name].label][2])
        w_bm25, w_dense, train = weights[plain[chosen].label]
        label = fused_spec(plain[chosen], w_bm25, w_dense).label
        best = methods[label]
        gain = best["ndcg@10"] - hybrid["ndcg@10"]
        knn = (f"{best['ndcg@10'] - methods[plain['rerank'].label]['ndcg@10']:+.4f} over "
               "rerank-of-kNN, " if "rerank" in plain else "")
        against = (f" Against {reference['label']} ({reference['ndcg@10']:.4f}): "
                   f"robustness index, hurt share {robustness_cells(best, reference)}."
                   if reference else "")
        lines.append(
            f"- **{budget} pairs:** chosen on train ({train:.4f}): `{label}`, test "
            f"{best['ndcg@10']:.4f}: {knn}{gain:+.4f} over rerank-hybrid (R@100 "
            f"{best['recall@100']:.4f} against {hybrid['recall@100']:.4f}).{against}")
    return lines


def best_method(runs: Mapping[str, Mapping[str, Any]], budget: int
                ) -> tuple[float, str, str]:
    """(fused train nDCG@10, candidate, fused label) of the best fit at `budget` among
    `runs`' labelers and methods."""
    options = [(run["weights"][plain_spec(name, budget).label][2], candidate, name)
               for candidate, run in runs.items() for name in METHODS
               if plain_spec(name, budget).label in run["weights"]]
    train, candidate, name = max(options)
    plain = plain_spec(name, budget)
    w_bm25, w_dense, _ = runs[candidate]["weights"][plain.label]
    return train, candidate, fused_spec(plain, w_bm25, w_dense).label


def first_engine_methods(run: Mapping[str, Any]) -> dict[str, Any]:
    return dict(next(iter(run["engines"].values()))["methods"])


def mean_over(method: Mapping[str, Any], queries: Sequence[str]) -> float:
    """A measured method's mean test nDCG@10 over `queries`."""
    per_query = method["ndcg@10_per_query"]
    return float(sum(per_query.get(q, 0.0) for q in queries) / len(queries))


def frontier_per_budget(runs: Mapping[str, Mapping[str, Any]],
                        new_queries: Sequence[str] = ()) -> list[str]:
    """Per budget: the (labeler, method) with the best fused train nDCG@10, on test on its
    run's first engine, against the same labeler's rerank-hybrid and relevance feedback,
    and against the frontier before ensembles (`BEFORE`); with `new_queries` (the test
    queries whose relevant docs train never judged), both on those alone too."""
    lines = []
    for budget in BUDGETS:
        train, candidate, label = best_method(runs, budget)
        run = runs[candidate]
        methods = first_engine_methods(run)
        test = methods[label]["ndcg@10"]
        peers = [f"{test - methods[plain_spec(peer, budget).label]['ndcg@10']:+.4f} over "
                 f"plain {peer}" for peer in (BASELINE, FEEDBACK)
                 if peer in METHODS and plain_spec(peer, budget).label in methods]
        gain = test - BEFORE[budget]
        apart, before, default = "", "", {}
        if LABELERS[0] in runs:
            before = best_method({LABELERS[0]: runs[LABELERS[0]]}, budget)[2]
            default = first_engine_methods(runs[LABELERS[0]])[before]
        # runs made before per-query figures were kept have none to part
        if new_queries and "ndcg@10_per_query" in default:
            mine = mean_over(methods[label], new_queries)
            theirs = mean_over(default, new_queries)
            apart = (f" On the {len(new_queries)} test queries whose relevant docs train "
                     f"never judged: {mine:.4f} against {theirs:.4f} ({mine - theirs:+.4f}), "
                     f"the default labeler's choice `{before}`.")
        lines.append(
            f"- **{budget} pairs:** chosen on train ({train:.4f}): labeler `{run['name']}`, "
            f"`{label}`, test {test:.4f}: {'; '.join(peers)} (same labeler); "
            f"{gain:+.4f} over the frontier before ensembles ({BEFORE[budget]:.4f}).{apart}")
    return lines


def markdown(collected: Mapping[str, Any]) -> str:
    runs = labeler_runs(collected)
    choice = chosen(runs)
    lines = ["# The budget frontier", "",
             "Written by `python -m es_tour.bench.frontier` (and `make bench-frontier`); never "
             "edited by hand.", "",
             f"SciFact test, {collected['test_queries']} queries; everything chosen on train. "
             "Each method is capped at the budget (labeler pairs per query). *Fused* reranks "
             "the labelled docs by z(φ) + w_bm25·z(BM25) + w_dense·z(kNN score), weights "
             "fitted on train per labeler, method and budget (`w_bm25`, `w_dense` options). "
             "Labels come from each model's cached corpus vectors (the same φ as embedding "
             "each doc); the retriever is minilm-l6.", "",
             "## The labelers", "",
             f"An ensemble's member weights are fitted first, on train: φ alone reranking "
             f"`{MEMBER_FIT_METHOD}`'s pool at {CHOICE_BUDGET} pairs "
             "(`tuning.fit_members`). The labeler chosen is the one whose best method fits "
             f"train best at {CHOICE_BUDGET} pairs.", "",
             "| candidate | as measured | member fit, train nDCG@10 | best fused train "
             f"nDCG@10 at {CHOICE_BUDGET} | engines | date |", "|---|---|---|---|---|---|"]
    for candidate, run in runs.items():
        member_fit = run.get("member_fit_ndcg@10")
        lines.append(f"| `{candidate}`{' (chosen)' if candidate == choice else ''} | "
                     f"`{run['name']}` | {f'{member_fit:.4f}' if member_fit else '–'} | "
                     f"{best_fit(run):.4f} | {', '.join(run['engines'])} | {run['date']} |")
    lines += ["", "## The frontier", "",
              "Per budget, the labeler and method (fused) with the best train nDCG@10:", "",
              *frontier_per_budget(runs, collected.get("new_to_train", ())), ""]
    for candidate, run in runs.items():
        lines += run_section(candidate, run)
    first = next(iter(runs[choice]["engines"].values()))["methods"]
    per_round = {label: m["ndcg@10_per_round"] for label, m in first.items()
                 if not m["fused"] and len(m["ndcg@10_per_round"]) > 1}
    columns = max(map(len, per_round.values()), default=1)
    lines += [f"## nDCG@10 per round (`{runs[choice]['name']}`, first engine, plain)", "",
              "| method | round 0 | " + " | ".join(map(str, range(1, columns))) + " |",
              "|---|" + "---|" * columns]
    for label, rounds in per_round.items():
        cells = [f"{v:.4f}" for v in rounds] + [""] * (columns - len(rounds))
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    lines += ["", f"## Δq operators chosen (`{runs[choice]['name']}`, first engine, plain)",
              "", "| method | operators |", "|---|---|"]
    lines += [f"| `{label}` | {m['operators']} |" for label, m in first.items()
              if m["operators"] and not m["fused"]]
    lines += ["", "![nDCG@10 against the budget](../img/frontier-budgets.png)", ""]
    return "\n".join(lines)


def run_section(candidate: str, run: Mapping[str, Any]) -> list[str]:
    """One labeler's run: how it was made, and per engine its table and each budget's
    choice."""
    lines = [f"## Labeler `{run['name']}`", "",
             f"- command: `{run['command']}`",
             *([f"- fusion weights fitted by: `{run['fit_command']}`"]
               if "fit_command" in run else []),
             f"- date: {run['date']}; machine: {run['machine']}",
             *[f"- then {', '.join(f'`{m}`' for m in added['methods'])} added on "
               f"{added['date']} (weights fitted and test measured only for them): "
               f"`{added['command']}`" for added in run.get("added", [])],
             f"- fusion weights fitted on the first {run['train_queries']} train queries"
             + (", each labelled by the fold's query tower that never trained on it "
                "(`es-tour train-labeler`, cross-fitted)" if run.get("cross_fitted") else ""),
             ""]
    for engine, result in run["engines"].items():
        methods = result["methods"]
        measured = measured_methods(methods)
        reference = result.get("reference")
        lines += [f"### {engine} {result['version']}", "",
                  *([f"Robustness: the index (wins − losses) / queries and the share of "
                     f"queries hurt by 0.2 nDCG@10 or more, against `{reference['label']}` "
                     f"({reference['ndcg@10']:.4f}, measured {reference['date']}"
                     + (f" by `{reference['command']}`" if "command" in reference else "")
                     + ").", ""] if reference else []),
                  "| budget | method | nDCG@10 plain | fused | R@100 plain | fused "
                  "| robustness plain | fused | pairs/query "
                  "| w_bm25, w_dense (train nDCG@10 fused) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for budget in BUDGETS:
            for name in measured:
                plain = plain_spec(name, budget)
                w_bm25, w_dense, train = run["weights"][plain.label]
                p = methods[plain.label]
                f = methods[fused_spec(plain, w_bm25, w_dense).label]
                lines.append(f"| {budget} | `{plain.label}` | {p['ndcg@10']:.4f} | "
                             f"{f['ndcg@10']:.4f} | {p['recall@100']:.4f} | "
                             f"{f['recall@100']:.4f} | {robustness_cells(p, reference)} | "
                             f"{robustness_cells(f, reference)} | "
                             f"{p['pairs_scored_mean']:.1f} | "
                             f"{w_bm25}, {w_dense} ({train:.4f}) |")
        lines += ["", "**Per budget** (the method is chosen by its fused train nDCG@10):", "",
                  *chosen_per_budget(methods, run["weights"], measured, reference), ""]
    return lines


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
              test_queries: int | None, labeler: str, previous: Mapping[str, Any] | None = None,
              methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """One labeler's run: its member weights (an ensemble's; kept from `previous` when it
    has them), the fusion weights `previous` lacks fitted on train, then `methods`
    measured on test on each engine."""
    first_url = next(iter(urls.values()))
    described = ({key: previous[key] for key in ("candidate", "name", "member_weights",
                                                 "member_fit_ndcg@10") if key in previous}
                 if previous else await fit_labeler(dataset, first_url, train_queries, labeler))
    weights = await fit_weights(dataset, first_url, train_queries,
                                previous["weights"] if previous else {}, described["name"],
                                methods)
    engines = {engine: await measure(dataset, engine, url, weights, test_queries, methods,
                                     described["name"])
               for engine, url in urls.items()}
    return {**described, "date": now(), "machine": machine(), "weights": weights,
            "engines": engines,
            "train_queries": len(list(dataset.queries("train"))[:train_queries]),
            "cross_fitted": any(part != labeler for part, _ in train_parts(
                labeler, list(dataset.queries("train"))[:train_queries])),
            "test_queries": len(list(dataset.queries("test"))[:test_queries])}


def merge(previous: Mapping[str, Any], new: Mapping[str, Any], methods: Sequence[str],
          command: str) -> dict[str, Any]:
    """`previous` with `new`'s weights and its measurements of `methods` on each engine,
    the addition recorded beside the run it joins."""
    engines = {engine: {**result, "methods": {
                   **result["methods"], **new["engines"].get(engine, {}).get("methods", {})}}
               for engine, result in previous["engines"].items()}
    record = {"methods": list(methods), "date": new["date"], "command": command}
    return {**previous, "weights": new["weights"], "engines": engines,
            "added": [*previous.get("added", []), record]}


def labeler_runs(collected: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """candidate labeler -> its run; a page written before there were candidates is the
    default labeler's run."""
    if "labelers" in collected:
        return dict(collected["labelers"])
    return {LABELERS[0]: {"candidate": LABELERS[0], "name": LABELERS[0], **collected}}


def best_fit(run: Mapping[str, Any], budget: int = CHOICE_BUDGET) -> float:
    """The best fused train nDCG@10 of a labeler's methods at `budget`."""
    labels = (plain_spec(name, budget).label for name in METHODS)
    return float(max(run["weights"][label][2] for label in labels if label in run["weights"]))


def chosen(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """The candidate whose best method fits train best at `CHOICE_BUDGET`."""
    return max(runs, key=lambda candidate: best_fit(runs[candidate]))


def collect(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The page's data: every labeler's run, and the chosen one's at the top level (what
    RESULTS.md and the reproduction test read)."""
    choice = chosen(runs)
    return {**runs[choice], "chosen": choice, "labelers": dict(runs)}


def new_to_train(dataset: BeirDataset) -> list[str]:
    """The test queries none of whose relevant docs train judged relevant: where a labeler
    tuned on train cannot have learned which docs answer."""
    test = dataset.qrels("test")
    return judged_apart(list(test), test, dataset.qrels("train"))["judged docs new"]


def write(collected: dict[str, Any], out: Path, images: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    first = next(iter(collected["engines"]))
    plot(collected["engines"][first]["methods"], images / "frontier-budgets.png",
         f"SciFact test on {first}: nDCG@10 by labeler budget")
    (out / "frontier.json").write_text(json.dumps(collected, indent=1))
    path = out / "frontier.md"
    path.write_text(markdown(collected))
    splice_results_section(out.parent / "RESULTS.md", out / "frontier.json")
    return path


def results_section(path: Path) -> list[str]:
    """RESULTS.md's frontier section: each budget's choice, from the json at `path`."""
    if not path.is_file():
        return []
    collected = json.loads(path.read_text())
    name, engine = next(iter(collected["engines"].items()))
    added = "".join(f"; {', '.join(f'`{m}`' for m in each['methods'])} added {each['date']}"
                    for each in collected.get("added", []))
    return [RESULTS_HEADING, "",
            f"Every labelling method at {', '.join(map(str, BUDGETS))} labeler pairs "
            f"per query, plain and fused, on {name}"
            + (f" with the labeler `{collected['name']}` (chosen on train)"
               if "name" in collected else "")
            + f" ({collected['test_queries']} test "
            f"queries, {collected['date']}{added}); the full tables, both engines, per round "
            "and Δq operators are in [benchmarks/frontier.md](benchmarks/frontier.md).", "",
            *chosen_per_budget(engine["methods"], collected["weights"],
                               measured_methods(engine["methods"]), engine.get("reference")),
            "",
            RESULTS_IMAGE, ""]


def splice_results_section(results: Path, path: Path) -> None:
    """Replaces RESULTS.md's frontier section (its heading to its plot) with the json's,
    so the page and RESULTS.md never disagree."""
    if not results.is_file():
        return
    text = results.read_text()
    if RESULTS_HEADING not in text:
        return
    start = text.index(RESULTS_HEADING)
    end = text.index(RESULTS_IMAGE, start) + len(RESULTS_IMAGE)
    section = "\n".join(results_section(path)).rstrip("\n")
    results.write_text(text[:start] + section + text[end:])


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__)
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
    parser.add_argument("--labelers", default=",".join(LABELERS), metavar="LABELER[,LABELER]",
                        help="the candidate labelers to run (a model, or models joined by +); "
                             "<out>/frontier.json's runs of the others are kept")
    parser.add_argument("--engines", default="opensearch,elasticsearch",
                        help="the engines to measure test on (the first fits)")
    parser.add_argument("--methods", default=",".join(METHODS), metavar="METHOD[,METHOD]",
                        help="the METHODS entries to run (default: all); the page compares with "
                             f"{BASELINE}")
    parser.add_argument("--reference", action="store_true",
                        help=f"measure only {REFERENCE}, the robustness columns' reference, "
                             "on test on each engine of <out>/frontier.json's runs, and "
                             "rewrite the page")
    args = parser.parse_args(argv)
    added = tuple(args.add.split(",")) if args.add else ()
    methods = tuple(args.methods.split(","))
    if unknown := [name for name in (*added, *methods) if name not in METHODS]:
        parser.error(f"--add and --methods take entries of METHODS, not {unknown}")
    if BASELINE not in methods:
        parser.error(f"--methods must include {BASELINE}: the page compares with it")
    if added and not args.reuse_weights:
        parser.error("--add needs --reuse-weights: it keeps the measurements already made")
    page = args.out / "frontier.json"
    runs = labeler_runs(json.loads(page.read_text())) if page.is_file() else {}
    if args.rerender or args.reuse_weights or args.reference:
        if not runs:
            parser.error(f"--rerender, --reuse-weights and --reference need {page}")
    command = portable_command("python -m es_tour.bench.frontier",
                               sys.argv[1:] if argv is None else argv)
    known = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    if args.reference:
        engines = {engine for kept in runs.values() for engine in kept["engines"]}
        references = {engine: {**asyncio.run(measure_reference(
                          BeirDataset(args.dataset), engine, known[engine],
                          args.test_queries)), "command": command}
                      for engine in sorted(engines)}
        for kept in runs.values():
            for engine, result in kept["engines"].items():
                result["reference"] = references[engine]
    elif not args.rerender:
        urls = {engine: known[engine] for engine in args.engines.split(",")}
        for labeler in args.labelers.split(","):
            previous = runs.get(labeler) if args.reuse_weights else None
            train_queries = previous["train_queries"] if previous else args.train_queries
            run_now = asyncio.run(run(BeirDataset(args.dataset), urls, train_queries,
                                      args.test_queries, labeler, previous, added or methods))
            run_now["command"] = command
            if previous:
                run_now["fit_command"] = previous.get("fit_command", previous["command"])
            if added and previous:
                run_now = merge(previous, run_now, added, command)
            runs[labeler] = run_now
    collected = {**collect(runs), "new_to_train": new_to_train(BeirDataset(args.dataset))}
    print(f"wrote {write(collected, args.out, args.out.parent / 'img')}")


if __name__ == "__main__":
    main()
