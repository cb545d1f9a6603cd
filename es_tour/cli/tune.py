"""`es-tour tune`: choose an index's method, fusion weights and labeler (the one given, or
one it trains on the judgements) on train, guard the choice against rerank-hybrid, keep a
labelling method only where it beats the labeler-free candidates (plain BM25,
hybrid-linear) by enough on validation queries, report them all on held-out queries and,
with --apply, set the recommendation on the index: a method, or TOUR off."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table
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
    LABEL_WIDTH,
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
    short_labels,
)
from es_tour.datasets import BeirDataset, BeirSplit
from es_tour.errors import ConfigError, ModelError
from es_tour.evaluation import (
    MethodSpec,
    evaluate,
    expected_pairs,
    parse_budgets,
    parse_methods,
    progress_bar,
)
from es_tour.metrics import robustness
from es_tour.models import WEIGHT_MARK, DualEncoder, is_ensemble, load_labeler
from es_tour.models._corpus_cache import corpus_embeddings, has_corpus_embeddings
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.paths import models_dir
from es_tour.pipeline import BUDGET_OPTIONS, SearchContext
from es_tour.server import ServerConfig
from es_tour.server._options import SETTINGS_PREFIX, settings_for
from es_tour.tuning import (
    BASELINE,
    CANDIDATES,
    CONCURRENCY,
    MEMBER_FIT_METHOD,
    MIN_GAIN,
    MIN_ROBUSTNESS,
    MIN_TUNING_QUERIES,
    Cost,
    Decision,
    Fitted,
    Measured,
    Splits,
    choose,
    decide,
    fit_candidates,
    fit_lexical_weight,
    fit_members,
    labeler_free,
    linear_pools,
    plain_spec,
    pools,
    splits,
    weighted_labeler,
)

# `make bench-load`'s measurements: what each method's search costs over a plain one
LOAD_BENCH = Path(__file__).parents[2] / "docs" / "benchmarks" / "load.json"
# settings that weigh scores without changing what a search runs: a cost holds for any
WEIGHTS = ("bm25_weight", "dense_weight", "lexical_weight")


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
        "--apply", help="write the recommendation at the largest budget to the index's "
                        "index.tour.* settings (the plugin validates them), clearing the "
                        "others; index.tour.enabled: false where plain BM25 is best")] = False,
    min_gain: Annotated[float, typer.Option(
        help="nDCG@10 a labelling method must gain on the validation queries over the best "
             "labeler-free candidate (plain BM25, hybrid-linear) to be kept")] = MIN_GAIN,
    min_robustness: Annotated[float, typer.Option(
        help="the least (wins - losses) / queries a labelling method may have against that "
             "candidate on the validation queries (a win or a loss: nDCG@10 moved over "
             "0.01)", min=-1, max=1)] = MIN_ROBUSTNESS,
    costs: Annotated[Path | None, typer.Option(
        help="the load benchmark's JSON (make bench-load): each method's engine CPU and p50 "
             "over a plain search, shown beside it [default: the checkout's "
             "docs/benchmarks/load.json]")] = None,
    train_labeler: Annotated[bool, typer.Option(
        help="where the fitting queries number --tuning-queries or more, also train a "
             "labeler of the index's own (es-tour train-labeler: the labeler's query "
             "tower, cross-fitted, on the fitting queries alone) and choose between it and "
             "--labeler")] = True,
    tuning_queries: Annotated[int, typer.Option(
        help="the judged fitting queries --train-labeler needs", min=2)] = MIN_TUNING_QUERIES,
    corpus_vectors: CorpusVectors = None,
    output: Output = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Choose the index's method and fusion weights on most of the dataset's train queries,
    at each budget; on the other train queries (a fixed-seed part) keep the choice if it
    holds up against rerank-hybrid, else rerank-hybrid, and keep that labelling method only
    if it beats the best labeler-free candidate (plain BM25, hybrid-linear with its weight
    fitted) by --min-gain without losing more queries than it wins, else recommend that
    candidate (plain BM25: TOUR off); report them on held-out queries no decision reads
    (test, or a fixed-seed part of the only judged split), apart by whether the fitting
    queries judged one of their relevant docs; with --apply, set the recommendation on the
    index. With --tuning-queries judged fitting queries or more, a labeler of the index's
    own, the labeler's query tower tuned on them alone, is a candidate beside it."""
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
    rule = Rule(min_gain, min_robustness, measured_costs(costs or LOAD_BENCH, target.engine))
    tuning = tuning_queries if train_labeler else None
    results = asyncio.run(_tune(target, data, index or data.name, labeler, levels, names,
                                divided, fitting, corpus_vectors, apply, rule, tuning))
    linear = results["labeler_free_fit"]
    console.print(f"hybrid-linear's lexical_weight fitted on the fitting queries: "
                  f"{linear['lexical_weight']} (nDCG@10 {linear['fit_ndcg@10']:.4f})")
    for budget, result in results["budgets"].items():
        print_choice(console, data.name, int(budget), result)
    if output:
        output.write_text(json.dumps(results, indent=2))
        console.print(f"wrote {output}")


@dataclass(frozen=True)
class Rule:
    """When a labelling method is kept (`tuning.decide`), and each method's measured cost
    (`measured_costs`), shown beside it."""

    min_gain: float
    min_robustness: float
    costs: Sequence[tuple[dict[str, Any], Cost]]


async def _tune(target: EngineTarget, data: BeirDataset, index: str, labeler: str,
                budgets: Sequence[int], candidates: Sequence[str], divided: Splits,
                fitting: Mapping[str, str], corpus_vectors: bool | None, apply: bool,
                rule: Rule, tuning_queries: int | None = None) -> dict[str, Any]:
    """Fit, guard, decide and report at each budget, then (with `apply`) set the largest
    budget's recommendation. With several labelers, each candidate runs with each (an
    ensemble's member weights fitted first) and the best fit chooses both; with
    `tuning_queries` fitting queries or more, one more: the first labeler's query tower
    tuned on them (`_train_labeler`), each fitting query labelled by the fold tower that
    never trained on it. The guard and the decision read the validation queries, which no
    tower trained on; the held-out (report) queries are searched only after they have."""
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
        "held_out_qids": list(held_out), "min_gain": rule.min_gain,
        "min_robustness": rule.min_robustness, "labelers": {}, "budgets": {}}
    async with context.engine:
        context, own = await _searchable(context, data, labelers[0], target)
        from es_tour.training._corpus import judged_apart
        from es_tour.training._query_tower import train_parts

        # the held-out queries by whether the fitting queries judged one of their relevant
        # docs: what a labeler tuned on them can have learned is which docs answer
        apart = judged_apart(list(held_out), data.qrels(divided.report),
                             {q: fit_qrels[q] for q in fitting if q in fit_qrels})

        if tuning_queries is not None:
            tuned = _train_labeler(data, divided, fitting, fit_qrels, labelers[0], index,
                                   own, tuning_queries)
            results["tuned_labeler"] = tuned
            if tuned.get("name"):
                labelers.append(tuned["name"])
        # every candidate searches the same queries: each embedded once, before the first
        context = replace(context, query_vectors={})
        context.embed_ahead([*fitting.values(), *validation.values(), *held_out.values()])
        with progress_bar("fit hybrid-linear's lexical weight", len(fitting),
                          err_console) as advance:
            found = await linear_pools(context, fitting, advance)
        lexical_weight, linear_fit = fit_lexical_weight(found, fit_qrels)
        results["labeler_free_fit"] = {"lexical_weight": lexical_weight,
                                       "fit_ndcg@10": linear_fit}
        pairs = expected_pairs([plain_spec(name, budget) for name in candidates
                                for budget in budgets],
                               len(fitting) + len(validation) + len(held_out), False)
        contexts, parts = {}, {}
        for name in labelers:
            fitted_name, facts = await _fit_labeler(context, data, own, corpus_vectors, pairs,
                                                    name, fitting, fit_qrels, max(budgets))
            contexts[fitted_name] = _labelled(context, data, own, corpus_vectors, pairs,
                                              fitted_name)
            # a labeler tuned on the fitting queries labels each by the fold that held it out
            parts[fitted_name] = [
                (contexts[fitted_name] if part == fitted_name else
                 _labelled(context, data, own, corpus_vectors, pairs, part),
                 {q: fitting[q] for q in queries})
                for part, queries in train_parts(fitted_name, list(fitting))]
            results["labelers"][name] = {"name": fitted_name, **facts}
        for budget in budgets:
            fitted: list[Fitted] = []
            for name in contexts:
                with progress_bar(f"fit at {budget} pairs ({name})",
                                  len(candidates) * len(fitting), err_console) as advance:
                    fitted += await fit_candidates(parts[name], fit_qrels, budget,
                                                   candidates, advance, labeler=name)
            chosen = choose(fitted)
            results["budgets"][str(budget)] = await _decide_budget(
                contexts[chosen.labeler], data, divided, validation, held_out, budget, fitted,
                chosen, labeler_free(lexical_weight), rule, apart)
        if apply:
            budget = max(budgets)
            settings = results["budgets"][str(budget)]["settings"]
            await _apply_settings(console, context.engine, index,
                                  {**settings, **await _stale(context, index, settings)},
                                  f"tune's recommendation at {budget} labeler pairs per query",
                                  ServerConfig(upstream=target.url, engine=target.engine))
            results["applied"] = {"budget": budget, "settings": settings}
    return results


async def _decide_budget(labelled: SearchContext, data: BeirDataset, divided: Splits,
                         validation: Mapping[str, str], held_out: Mapping[str, str],
                         budget: int, fitted: Sequence[Fitted], chosen: Fitted,
                         free: Sequence[MethodSpec], rule: Rule,
                         apart: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """One budget's decision on the validation queries among the choice, rerank-hybrid and
    the labeler-free `free`, then all of them on the held-out queries, which only report:
    over them all, and over each part of `apart` (held-out query ids by part)."""
    baseline = plain_spec(BASELINE, budget)
    refining = [chosen.fused, baseline]
    specs = [*refining, *free]
    checked = await evaluate(labelled, data, specs, split=divided.fit, query_ids=validation,
                             cold_labels=False, concurrency=CONCURRENCY)
    qrels = data.qrels(divided.fit)
    decision = decide([Measured(report.spec.label, report.ndcg_by_query(qrels),
                                report.spec in refining, _cost_of(report.spec, rule.costs))
                       for report in checked], rule.min_gain, rule.min_robustness)
    kept = next(spec for spec in specs if spec.label == decision.kept)
    reported = await evaluate(labelled, data, specs, split=divided.report, query_ids=held_out,
                              cold_labels=False, concurrency=CONCURRENCY)
    # the held-out queries, query by query, against the candidate the decision measured by
    report_qrels = data.qrels(divided.report)
    against = next(report for report in reported if report.spec.label == decision.against)
    reference = against.ndcg_by_query(report_qrels)
    held_out_robustness = {
        report.spec.label: robustness(report.ndcg_by_query(report_qrels), reference).to_dict()
        for report in reported}
    held_out_apart = {report.spec.label: _apart(report.ndcg_by_query(report_qrels), reference,
                                                apart)
                      for report in reported}
    settings: dict[str, Any] = ({f"{SETTINGS_PREFIX}enabled": False} if decision.off
                                else settings_for(kept.name, kept.options))
    if kept in refining and chosen.labeler != "default":
        settings[f"{SETTINGS_PREFIX}labeler"] = chosen.labeler
    return {
        "candidates": [{"label": each.spec.label, "labeler": each.labeler,
                        "w_bm25": each.w_bm25, "w_dense": each.w_dense,
                        "fit_ndcg@10": each.fit_ndcg, "chosen": each is chosen}
                       for each in fitted],
        "choice": chosen.fused.label, "labeler": chosen.labeler, "baseline": baseline.label,
        "labeler_free": [spec.label for spec in free],
        "validation": {report.spec.label: report.summary() for report in checked},
        "held_out": {report.spec.label: {**report.summary(),
                                         "robustness": held_out_robustness[report.spec.label],
                                         "apart": held_out_apart[report.spec.label]}
                     for report in reported},
        "decision": _decision_facts(decision), "recommended": kept.label, "off": decision.off,
        "settings": settings}


def _apart(ndcg: Mapping[str, float], reference: Mapping[str, float],
           apart: Mapping[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """Per part of `apart`: its queries, mean nDCG@10 and robustness against `reference`."""
    figures = {}
    for part, ids in apart.items():
        mine = {qid: ndcg[qid] for qid in ids if qid in ndcg}
        figures[part] = {"queries": len(mine),
                         "ndcg@10": sum(mine.values()) / len(mine) if mine else None,
                         "robustness": robustness(mine, reference).to_dict()}
    return figures


def _decision_facts(decision: Decision) -> dict[str, Any]:
    """`decision` as JSON: each candidate's standing against the best labeler-free one."""
    return {"kept": decision.kept, "off": decision.off, "reason": decision.reason,
            "against": decision.against,
            "standings": [{"label": each.candidate.label, "refining": each.candidate.refining,
                           "ndcg@10": round(each.candidate.mean, 4),
                           "gain": round(each.gain, 4), "wins": each.wins,
                           "losses": each.losses, "queries": len(each.candidate.ndcg),
                           "robustness": each.versus.to_dict(),
                           "cost": (None if each.candidate.cost is None else
                                    {"engine_cpu": round(each.candidate.cost.engine_cpu, 2),
                                     "p50": round(each.candidate.cost.p50, 2)}),
                           "per_query": each.candidate.ndcg}
                          for each in decision.standings]}


# where the index's text and vectors are, and how its store is sharded: facts of the index,
# not of the method tune chose, so --apply keeps them
KEPT_ON_APPLY = tuple(f"{SETTINGS_PREFIX}{name}" for name in
                      ("encoder", "text_fields", "vector_field", "vector_store_shards"))


async def _stale(context: SearchContext, index: str, settings: Mapping[str, Any]
                 ) -> dict[str, None]:
    with context.engine.engine_errors():
        return stale_settings(await context.engine.settings(index), settings)


def stale_settings(current: Mapping[str, Any], written: Mapping[str, Any]) -> dict[str, None]:
    """The index's other index.tour.* method settings, each to be reset: what tune writes is
    all the index then runs (a pool or budget left from an earlier method would linger);
    KEPT_ON_APPLY's stay."""
    return {key: None for key in current if key.startswith(SETTINGS_PREFIX)
            and key not in written and key not in KEPT_ON_APPLY}


def measured_costs(path: Path, engine: str) -> list[tuple[dict[str, Any], Cost]]:
    """Each method the load benchmark's JSON at `path` measured on `engine`, as the
    index.tour.* settings (unprefixed, less weights) that run it, with its engine CPU and
    p50 over the plain match's; none where the file or the engine's rows are missing."""
    if not path.is_file():
        return []
    try:
        bench = json.loads(path.read_text())
        rows: list[dict[str, Any]] = next(
            (each["rows"] for each in bench["engines"] if each["engine"] == engine), [])
        plain = next((row for row in rows if row["side"] == "engine"), None)
        if plain is None:
            return []
        index_runs = {key.removeprefix(SETTINGS_PREFIX): value
                      for key, value in bench["settings"].items()}
        return [(_what_runs(dict(row["tour"]) if row["side"] == "methods" else index_runs),
                 Cost(row["engine_cpu_ms"] / plain["engine_cpu_ms"],
                      row["p50_ms"] / plain["p50_ms"]))
                for row in rows if row["side"] in ("methods", "index")]
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
        raise ConfigError(f"--costs {path} is not the load benchmark's JSON (make bench-load): "
                          f"{error!r}") from error


def _cost_of(spec: MethodSpec, costs: Sequence[tuple[dict[str, Any], Cost]]) -> Cost | None:
    """`spec`'s measured cost: the one whose settings run what `spec` runs, if any."""
    runs = _what_runs({key.removeprefix(SETTINGS_PREFIX): value
                       for key, value in settings_for(spec.name, spec.options).items()})
    return next((cost for measured, cost in costs if measured == runs), None)


def _what_runs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Unprefixed index.tour.* settings less the weights (`WEIGHTS`) and the switch."""
    return {key: value for key, value in settings.items()
            if key not in WEIGHTS and key != "enabled"}


def _train_labeler(data: BeirDataset, divided: Splits, fitting: Mapping[str, str],
                   qrels: Mapping[str, Mapping[str, int]], base: str, index: str, own: bool,
                   least: int) -> dict[str, Any]:
    """`base`'s query tower tuned on the `fitting` queries that `qrels` (the fit split's)
    judges, alone (`es-tour train-labeler`'s defaults, cross-fitted), written to the model
    cache as `<base>-<index>-tuned`: what it trained on and where, or why none was trained.
    A directory trained on the same queries and options already is reused."""
    from es_tour.training._query_tower import (
        TRAINING_FILE,
        QueryTowerOptions,
        tune_query_tower,
        tuning_steps,
    )

    judged = [q for q in fitting if qrels.get(q)]
    why_not = (f"{len(judged)} judged fitting queries, fewer than --tuning-queries {least}"
               if len(judged) < least else
               "the index is not es-tour's: the dataset's corpus need not be its docs"
               if own else None)
    registry_name = None if is_ensemble(base) else model_directory(base)[1]
    if why_not is None and registry_name is None:
        why_not = f"[{base}] is not one registry model whose query tower tune can train"
    if why_not is not None or registry_name is None:
        console.print(f"no labeler of the index's own: {why_not}")
        return {"trained": False, "why_not": why_not}
    options = QueryTowerOptions()
    name = f"{registry_name}-{index}-tuned"
    out = models_dir() / name
    facts_path = out / TRAINING_FILE
    if facts_path.is_file():
        facts = json.loads(facts_path.read_text(encoding="utf-8"))
        if facts["trained"] == judged and facts["options"] == asdict(options):
            console.print(f"labeler {name}: reused, trained on these {len(judged)} queries")
            return {"trained": False, "name": name, "reused": True, "queries": len(judged)}
    whole = data.split(divided.fit)
    keep = [i for i, q in enumerate(whole.query_ids) if q in fitting]
    split = replace(whole, query_ids=[whole.query_ids[i] for i in keep],
                    query_texts=[whole.query_texts[i] for i in keep],
                    qrels={q: whole.qrels[q] for q in judged})
    _embed_corpus(base, split)
    steps = tuning_steps(len(judged), options)
    console.print(
        f"training a labeler of the index's own, {name}: {registry_name}'s query tower on the "
        f"{len(judged)} judged fitting queries, {options.folds} folds and then all of them, "
        f"at most {options.epochs} epochs each: {steps} steps; the time left shows once the "
        "first are done", soft_wrap=True)
    try:
        with progress_bar(f"train {name}", steps, err_console, unit="steps") as advance:
            tuned = tune_query_tower(base, split, out, options, lambda: advance(""))
    except ModelError as error:  # torch missing, or a tower torch cannot load
        console.print(f"no labeler of the index's own: {error}")
        return {"trained": False, "why_not": str(error)}
    base_ndcg, tuned_ndcg = tuned.cross_fitted()
    console.print(f"trained {name} in {tuned.seconds / 60:.1f} min: cross-fitted exact "
                  f"nDCG@10 on the fitting queries {base_ndcg:.4f} -> {tuned_ndcg:.4f}")
    return {"trained": True, "name": name, "queries": len(judged),
            "seconds": round(tuned.seconds), "epochs": tuned.chosen_epoch,
            "cross_fitted_ndcg@10": {"base": base_ndcg, "tuned": tuned_ndcg}}


def _embed_corpus(labeler: str, split: BeirSplit) -> None:
    """The labeler's doc vectors of the corpus, which tuning its query tower reads, embedded
    once into the model cache where they are not there yet, with a bar."""
    path, registry_name = model_directory(labeler)
    encoder = DualEncoder(path, labeler_precision(labeler))
    if has_corpus_embeddings(encoder, split.corpus_path, split.doc_texts):
        return
    docs = len(split.doc_texts)
    console.print(f"embedding the corpus's {docs:,} docs with {registry_name or labeler} "
                  "first, once (the model cache keeps them); the time left shows once the "
                  "first are done")
    with progress_bar("embed the corpus", docs, err_console, unit="docs") as advance:

        def batch_done(done: int) -> None:
            for _ in range(done):
                advance("")

        corpus_embeddings(encoder, split.corpus_path, split.doc_texts, batch_done)


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
    """One budget's candidates with their fitted weights; then the choice, rerank-hybrid and
    the labeler-free candidates on the validation queries (nDCG@10, gain, wins/losses, the
    robustness index and hurt share against the best labeler-free one: what the decision
    reads), with each one's measured cost, held-out nDCG@10 and robustness (reported only);
    then the decision and why."""
    labelers = len({each["labeler"] for each in result["candidates"]})
    table = Table("candidate", *(["labeler"] if labelers > 1 else []), "w_bm25", "w_dense",
                  "fit nDCG@10", title=f"{dataset} at {budget} labeler pairs per query")
    for each in result["candidates"]:
        label = each["label"] + (" (chosen)" if each["chosen"] else "")
        table.add_row(Text(label), *([Text(each["labeler"])] if labelers > 1 else []),
                      str(each["w_bm25"]), str(each["w_dense"]), f"{each['fit_ndcg@10']:.4f}")
    out.print(table)
    decision = result["decision"]
    standings = decision["standings"]
    shown = short_labels([each["label"] for each in standings])
    queries = standings[0]["queries"]
    table = Table(Column("candidate", no_wrap=True, min_width=LABEL_WIDTH), "labels",
                  "nDCG@10", "gain", "wins / losses", "RI", "hurt ≥0.2",
                  Column("cost: engine CPU, p50", no_wrap=True), "held-out nDCG@10",
                  "held-out RI, hurt",
                  title=f"validation ({queries} queries) against {shown[decision['against']]}, "
                        "the best labeler-free candidate")
    for each in standings:
        cost, versus = each["cost"], each["robustness"]
        held_out = result["held_out"][each["label"]]
        kept = " (kept)" if each["label"] == decision["kept"] else ""
        table.add_row(Text(shown[each["label"]] + kept), "yes" if each["refining"] else "no",
                      f"{each['ndcg@10']:.4f}", f"{each['gain']:+.4f}",
                      f"{each['wins']} / {each['losses']}", f"{versus['index']:+.2f}",
                      f"{versus['hurt_share']:.1%}",
                      (f"{cost['engine_cpu']:.1f}×, {cost['p50']:.1f}×" if cost
                       else "not measured"),
                      f"{held_out['ndcg@10']:.4f}",
                      f"{held_out['robustness']['index']:+.2f}, "
                      f"{held_out['robustness']['hurt_share']:.1%}")
    out.print(table)
    for label, short in shown.items():
        if short != label:
            out.print(Text(f"  {short[short.rindex('['):]} {label}"), soft_wrap=True)
    kept = result["held_out"][decision["kept"]]["apart"]
    against = result["held_out"][decision["against"]]["apart"]
    for part, figures in kept.items():
        if figures["queries"]:
            versus = figures["robustness"]
            whose = ("whose relevant docs include one" if part == "a judged doc seen" else
                     "none of whose relevant docs is one")
            out.print(Text(
                f"held-out queries {whose} the fitting queries judged ({figures['queries']}): "
                f"{shown[decision['kept']]} {figures['ndcg@10']:.4f} against "
                f"{against[part]['ndcg@10']:.4f}, RI {versus['index']:+.2f}, hurt "
                f"{versus['hurt_share']:.1%}"), soft_wrap=True)
    out.print(Text(f"decision: {decision['reason']}"), soft_wrap=True)
    out.print(Text(f"recommended settings: {settings_text(result['settings'])}"),
              soft_wrap=True)
