"""`es-tour eval`: run methods over a BEIR split and print their figures side by side."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from es_tour.cli._app import app
from es_tour.cli._checks import (
    CaCerts,
    ClientCert,
    ClientKey,
    VerifyCerts,
    engine_target,
    old_name_used,
    writable,
)
from es_tour.cli._errors import clean_errors
from es_tour.cli._shared import (
    CorpusVectors,
    Dataset,
    Engine,
    Index,
    Labeler_,
    Output,
    Url,
    _evaluate,
    console,
    print_table,
)
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.evaluation import (
    MethodSpec,
    parse_budgets,
    parse_methods,
    report_json,
    robustness_against,
    with_budgets,
)

# Cheap enough for a demo on two cores: the labeler (bge-small) scores about 3 docs/s.
DEMO_METHODS = "bm25,knn,rerank:k=10,tour-hard,tour-soft"

Budgets = Annotated[str | None, typer.Option(
    help="labeler pairs per query, e.g. 10,20,40: each labelling method runs once per "
         "budget, the others once")]


@app.command("eval")
@clean_errors
def eval_command(
    dataset: Dataset,
    methods: Annotated[str, typer.Option(
        help="comma list of name[:key=value...]; keys are the index.tour.* settings' names "
             "(bm25_weight, dense_weight, lambda, ...) or the method's own option names "
             "(w_bm25, w_dense, lam, ...)")] = DEMO_METHODS,
    split: Annotated[str, typer.Option(help="the qrels split to score on")] = "test",
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    labeler: Labeler_ = "default",
    max_queries: Annotated[int | None, typer.Option(help="only the first N queries",
                                                    min=1)] = None,
    budgets: Budgets = None,
    cold_labels: Annotated[bool, typer.Option(
        "--cold-labels/--no-cold-labels",
        help="time each method with an empty label cache; off, each (query, doc) pair is "
             "labelled once for the whole run (faster; latencies then hold only new "
             "labels)")] = False,
    label_once: Annotated[bool, typer.Option(
        "--label-once", hidden=True, help="the old name of --no-cold-labels")] = False,
    corpus_vectors: CorpusVectors = None,
    against: Annotated[str, typer.Option(
        help="compare each method, query by query, with this labeler-free method (run "
             "too if not listed): queries better/worse, the robustness index "
             "(better − worse) / queries, and the share hurt by ≥ 0.2 nDCG@10; '' for "
             "none")] = "hybrid-linear",
    output: Output = None,
    plot: Annotated[
        Path | None, typer.Option(help="write nDCG@10 against pairs scored (PNG) here")
    ] = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Run search methods through the engine over a split; print nDCG@10, Recall@100,
    MRR@10, latency, pairs scored and each method's robustness against a labeler-free
    reference (hybrid-linear). (`es-tour models evaluate` scores a model alone, as an exact
    dense retriever, with no engine and no method.)"""
    if label_once:
        if cold_labels:
            raise ConfigError("--label-once (the old name of --no-cold-labels) contradicts "
                              "--cold-labels")
        old_name_used("--label-once", "--no-cold-labels")
    data = BeirDataset(dataset)
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    specs = parse_methods(methods)
    if not specs:
        raise ConfigError("--methods names no method")
    data.qrels(split)  # an unknown split fails now, not after the ingest
    writable(output)
    writable(plot)
    levels = parse_budgets(budgets) if budgets is not None else []
    if levels:
        specs = with_budgets(specs, levels)
    reference = MethodSpec.parse(against).label if against else None
    if reference and reference not in {spec.label for spec in specs}:
        specs.append(MethodSpec.parse(against))
    reports = asyncio.run(_evaluate(target, data, index, specs, split, max_queries,
                                    labeler, cold_labels, corpus_vectors))
    title = f"{data.name} {split} on {engine}" + (
        "" if cold_labels else " (labels shared across methods: latencies hold new ones only)")
    robust = robustness_against(reports, data.qrels(split), reference) if reference else {}
    if not levels:
        print_table(console, title, reports, robust)
    for budget in levels:  # methods without a budget option show in every table
        print_table(console, f"{title}, at {budget} labeler pairs per query",
                    [r for r in reports if r.spec.budget in (None, budget)], robust)
    summary = report_json(data, engine, split, reports, robust, reference)
    if output:
        output.write_text(json.dumps(summary, indent=2))
        console.print(f"wrote {output}")
    if plot:
        from es_tour.bench.results import plot_frontier

        plot_frontier(summary["methods"], plot, title)
        console.print(f"wrote {plot}")
