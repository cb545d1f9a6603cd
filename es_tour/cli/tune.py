"""`es-tour tune`: choose an index's method and fusion weights on train, guard the choice
against rerank-hybrid, report both on held-out queries and, with --apply, set it on the
index."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from es_tour.cli._app import app
from es_tour.cli._checks import (
    CaCerts,
    ClientCert,
    ClientKey,
    EngineTarget,
    VerifyCerts,
    engine_target,
    writable,
)
from es_tour.cli._errors import clean_errors, err_console
from es_tour.cli._shared import (
    CorpusVectors,
    Dataset,
    Engine,
    Index,
    Output,
    Url,
    _apply_settings,
    _choose_labelling,
    _context,
    _searchable,
    console,
    settings_text,
)
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.evaluation import evaluate, expected_pairs, parse_budgets, parse_methods, progress_bar
from es_tour.models import WEIGHT_MARK, is_ensemble, load_labeler
from es_tour.pipeline import BUDGET_OPTIONS, SearchContext
from es_tour.server import ServerConfig
from es_tour.server._options import settings_for
from es_tour.tuning import (
    BASELINE,
    CANDIDATES,
    CONCURRENCY,
    MEMBER_FIT_METHOD,
    Fitted,
    Splits,
    choose,
    fit_candidates,
    fit_members,
    plain_spec,
    pools,
    splits,
    weighted_labeler,
)


@app.command("tune")
@clean_errors
def tune_command(
    dataset: Dataset,
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    budgets: Annotated[str, typer.Option(
        help="labeler pairs per query to choose for, e.g. 10,20")] = "10,20",
    candidates: Annotated[str, typer.Option(
        help="comma list of name[:key=value...] to choose from (the budget frontier's by "
             "default); each is capped at the budget")] = ",".join(CANDIDATES),
    labeler: Annotated[str, typer.Option(
        "--labeler", help="the labeler (a registry model name, a model directory, or models "
                          "joined by +), or comma-separated candidates to choose from; an "
                          "ensemble's member weights are fitted first, on the fit "
                          "queries")] = "default",
    fit_queries: Annotated[int | None, typer.Option(
        help="fit on the first N fitting queries only (default: all)", min=1)] = None,
    apply: Annotated[bool, typer.Option(
        "--apply", help="write the choice at the largest budget to the index's "
                        "index.tour.* settings (the plugin validates them)")] = False,
    corpus_vectors: CorpusVectors = None,
    output: Output = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Choose the index's method and fusion weights on most of the dataset's train queries,
    at each budget; recommend the choice if it holds up against rerank-hybrid on the other
    train queries (a fixed-seed part), else rerank-hybrid; report both on held-out queries
    no decision reads (test, or a fixed-seed part of the only judged split); with --apply,
    set the recommendation on the index."""
    data = BeirDataset(dataset)
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    levels = parse_budgets(budgets)
    specs = parse_methods(candidates)
    if not specs:
        raise ConfigError("--candidates names no method")
    if unbudgeted := [spec.label for spec in specs if spec.name not in BUDGET_OPTIONS]:
        raise ConfigError(f"--candidates must label docs (take a budget), not {unbudgeted}")
    names = [spec.label for spec in specs]
    divided = splits(data)
    fitting = dict(list(divided.queries(data, "fit").items())[:fit_queries])
    writable(output)
    console.print(f"{data.name}: {divided.describe()}"
                  + (f" (the first {len(fitting)} fitting queries)" if fit_queries else ""))
    results = asyncio.run(_tune(target, data, index or data.name, labeler, levels, names,
                                divided, fitting, corpus_vectors, apply))
    for budget, result in results["budgets"].items():
        print_choice(console, data.name, int(budget), result)
    if output:
        output.write_text(json.dumps(results, indent=2))
        console.print(f"wrote {output}")


async def _tune(target: EngineTarget, data: BeirDataset, index: str, labeler: str,
                budgets: Sequence[int], candidates: Sequence[str], divided: Splits,
                fitting: Mapping[str, str], corpus_vectors: bool | None, apply: bool
                ) -> dict[str, Any]:
    """Fit, guard and report at each budget, then (with `apply`) set the largest budget's
    recommendation. With several labelers, each candidate runs with each (an ensemble's
    member weights fitted first) and the best fit chooses both. The guard decides on the
    validation queries; the held-out (report) queries are searched only after it has."""
    labelers = [name.strip() for name in labeler.split(",") if name.strip()]
    context = _context(target, index, labelers[0])
    validation = divided.queries(data, "validation")
    held_out = divided.queries(data, "report")
    fit_qrels = data.qrels(divided.fit)
    results: dict[str, Any] = {
        "dataset": data.name, "engine": target.engine, "index": index, "labeler": labeler,
        "splits": divided.describe(), "fit_queries": len(fitting),
        "validation_queries": len(validation), "held_out_queries": len(held_out),
        "fit_qids": list(fitting), "validation_qids": list(validation),
        "held_out_qids": list(held_out), "labelers": {}, "budgets": {}}
    async with context.engine:
        context, own = await _searchable(context, data, labelers[0], target)
        # every candidate searches the same queries: each embedded once, before the first
        context = replace(context, query_vectors={})
        context.embed_ahead([*fitting.values(), *validation.values(), *held_out.values()])
        pairs = expected_pairs([plain_spec(name, budget) for name in candidates
                                for budget in budgets],
                               len(fitting) + len(validation) + len(held_out), False)
        contexts = {}
        for name in labelers:
            fitted_name, facts = await _fit_labeler(context, data, own, corpus_vectors, pairs,
                                                    name, fitting, fit_qrels, max(budgets))
            contexts[fitted_name] = _labelled(context, data, own, corpus_vectors, pairs,
                                              fitted_name)
            results["labelers"][name] = {"name": fitted_name, **facts}
        for budget in budgets:
            fitted: list[Fitted] = []
            for name, labelled in contexts.items():
                with progress_bar(f"fit at {budget} pairs ({name})",
                                  len(candidates) * len(fitting), err_console) as advance:
                    fitted += await fit_candidates(labelled, fitting, fit_qrels, budget,
                                                   candidates, advance, labeler=name)
            chosen = choose(fitted)
            chosen_labeler = chosen.labeler
            labelled = contexts[chosen_labeler]
            baseline = plain_spec(BASELINE, budget)
            pair = [chosen.fused, baseline]
            checked = await evaluate(labelled, data, pair, split=divided.fit,
                                     query_ids=validation, cold_labels=False,
                                     concurrency=CONCURRENCY)
            guard = {report.spec.label: report.summary() for report in checked}
            # the choice only if it holds up on queries the fit never saw: a fit on few
            # queries can pick a candidate that trails the plain reranker
            holds = guard[chosen.fused.label]["ndcg@10"] >= guard[baseline.label]["ndcg@10"]
            kept = chosen.fused if holds else baseline
            # decided: the held-out queries report it, and decide nothing
            reported = await evaluate(labelled, data, pair, split=divided.report,
                                      query_ids=held_out, cold_labels=False,
                                      concurrency=CONCURRENCY)
            scores = {report.spec.label: report.summary() for report in reported}
            settings = settings_for(kept.name, kept.options)
            if chosen_labeler != "default":
                settings["index.tour.labeler"] = chosen_labeler
            results["budgets"][str(budget)] = {
                "candidates": [{"label": each.spec.label, "labeler": each.labeler,
                                "w_bm25": each.w_bm25, "w_dense": each.w_dense,
                                "fit_ndcg@10": each.fit_ndcg, "chosen": each is chosen}
                               for each in fitted],
                "choice": chosen.fused.label, "labeler": chosen_labeler,
                "baseline": baseline.label, "validation": guard, "held_out": scores,
                "recommended": kept.label, "settings": settings}
        if apply:
            budget = max(budgets)
            recommended = results["budgets"][str(budget)]
            await _apply_settings(console, context.engine, index, recommended["settings"],
                                  f"tune's recommendation at {budget} labeler pairs per query",
                                  ServerConfig(upstream=target.url, engine=target.engine))
            results["applied"] = {"budget": budget, "settings": recommended["settings"]}
    return results


def _labelled(context: SearchContext, data: BeirDataset, own: bool,
              corpus_vectors: bool | None, pairs: int, labeler: str) -> SearchContext:
    """`context` labelled by `labeler`, from corpus vectors where they pay."""
    out = replace(context, labeler=load_labeler(labeler))
    _choose_labelling(out, data, own, corpus_vectors, lambda: pairs)
    return out


async def _fit_labeler(context: SearchContext, data: BeirDataset, own: bool,
                       corpus_vectors: bool | None, pairs: int, labeler: str,
                       fitting: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]],
                       budget: int) -> tuple[str, dict[str, Any]]:
    """`labeler` as tune runs it: an ensemble that names no weights with its member weights
    fitted on the `fitting` queries (`fit_members` over `MEMBER_FIT_METHOD`'s pools at
    `budget`); one that names them, or one model, as it is."""
    if not is_ensemble(labeler) or WEIGHT_MARK in labeler:
        return labeler, {}
    labelled = _labelled(context, data, own, corpus_vectors, pairs, labeler)
    with progress_bar(f"member weights of {labeler}", len(fitting), err_console) as advance:
        found = await pools(labelled, plain_spec(MEMBER_FIT_METHOD, budget), fitting, advance)
    weights, ndcg = fit_members(found, qrels)
    return weighted_labeler(labeler, weights), {"member_weights": list(weights),
                                                "member_fit_ndcg@10": ndcg}


def print_choice(out: Console, dataset: str, budget: int, result: Mapping[str, Any]) -> None:
    """One budget's candidates with their fitted weights, then the choice against the
    baseline on the validation queries (the guard's decision) and on the held-out ones
    (the report)."""
    labelers = len({each["labeler"] for each in result["candidates"]})
    table = Table("candidate", *(["labeler"] if labelers > 1 else []), "w_bm25", "w_dense",
                  "fit nDCG@10", title=f"{dataset} at {budget} labeler pairs per query")
    for each in result["candidates"]:
        label = each["label"] + (" (chosen)" if each["chosen"] else "")
        table.add_row(Text(label), *([Text(each["labeler"])] if labelers > 1 else []),
                      str(each["w_bm25"]), str(each["w_dense"]), f"{each['fit_ndcg@10']:.4f}")
    out.print(table)
    for part, what in (("validation", "validation (the guard decides)"),
                       ("held_out", "held out (reported only)")):
        mine, base = result[part][result["choice"]], result[part][result["baseline"]]
        gain = mine["ndcg@10"] - base["ndcg@10"]
        out.print(Text(f"{what}: {result['choice']} nDCG@10 {mine['ndcg@10']:.4f} against "
                       f"{result['baseline']} {base['ndcg@10']:.4f} ({gain:+.4f}); R@100 "
                       f"{mine['recall@100']:.4f} against {base['recall@100']:.4f}"),
                  soft_wrap=True)
    if result["recommended"] != result["choice"]:
        out.print(Text(f"the choice trails {result['baseline']} on the validation queries, "
                       f"so tune recommends {result['baseline']} (fit on more queries to "
                       "choose again)"), soft_wrap=True)
    out.print(Text(f"recommended settings: {settings_text(result['settings'])}"),
              soft_wrap=True)
