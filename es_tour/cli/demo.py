"""`es-tour demo`: index a BEIR dataset, put the budget frontier's settings on it, compare
methods, then serve the playground on the compared query (which one, and its link)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.markup import escape
from rich.text import Text

from es_tour.cli._app import app
from es_tour.cli._checks import (
    CaCerts,
    ClientCert,
    ClientKey,
    EngineTarget,
    VerifyCerts,
    engine_target,
)
from es_tour.cli._errors import clean_errors
from es_tour.cli._shared import (
    Dataset,
    Engine,
    Url,
    _apply_settings,
    _context,
    _evaluate,
    _ingest,
    _resolved_context,
    console,
    print_table,
)
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodReport, MethodSpec, parse_methods
from es_tour.pipeline import RankedHit, SearchContext, SearchResult
from es_tour.recommended import FRONTIER_20, FRONTIER_WHY
from es_tour.server import ServerConfig, parse_listen
from es_tour.server._options import Resolved, build

# the demo's frontier: at each labeler budget (pairs per query), reranking kNN's top,
# reranking BM25 ∪ kNN, TOUR, TOUR in the hybrid session, and the method with the best train
# nDCG@10 at that budget in docs/benchmarks/frontier.md (both with final-score fusion, the
# weights from train); bm25 and knn label nothing
DEMO_BUDGETS = {10: ("rerank:k=10", "rerank-hybrid:k=10", "tour-hard:k=5:budget=10",
                     "hybrid-tour:budget=10:k=5:w_bm25=0.3:w_dense=0.0",
                     "rerank:k=10:first_stage=hybrid-linear:w_bm25=0.5:w_dense=0.1"),
                20: ("rerank:k=20", "rerank-hybrid:k=20", "tour-hard",
                     "hybrid-tour:budget=20:k=10:w_bm25=0.3:w_dense=0.0",
                     "hybrid-tour:budget=20:k=10:pool=hybrid-linear:lexical=none:w_bm25=0.3"
                     ":w_dense=0.0")}
DEMO_FIRST_STAGE = ("bm25", "knn")
LATER_ROUND_SCAN = 60  # more test queries the demo may search for a later round's find


@app.command("demo")
@clean_errors
def demo_command(
    dataset: Dataset,
    engine: Engine = "opensearch",
    url: Url = None,
    queries: Annotated[int, typer.Option(help="test queries in the comparison", min=1)] = 20,
    serve: Annotated[bool, typer.Option(
        "--serve/--no-serve",
        help="end by serving the playground (the sidecar in front of the engine) until "
             "Ctrl-C")] = True,
    listen: Annotated[str, typer.Option(help="HOST:PORT the sidecar listens on")] =
        "127.0.0.1:9201",
    later_round_scan: Annotated[int, typer.Option(
        help="more test queries to search for one where a later round finds a relevant doc, "
             "when the sample has none", min=0)] = LATER_ROUND_SCAN,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Index the dataset, set the budget frontier's recommended index.tour.* settings on
    it, show the first test query's hits by knn and bm25 against the method those settings
    name, compare methods, then (unless --no-serve) store the judgements and serve the
    playground on that method and the compared query with its median nDCG@10 gain over knn
    (among those whose nDCG@10 it changed)."""
    data = BeirDataset(dataset)
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    if serve:
        parse_listen(listen)  # a bad --listen fails now, not after the comparison
    # the first comparison resolves the index's settings with the served sidecar's
    # defaults, so it runs what the playground's right column will
    config = demo_sidecar(target)
    qid, text = next(iter(data.queries("test").items()))
    relevant = data.qrels("test")[qid]

    async def show() -> Resolved:
        context = _context(target, data.name, "default")
        async with context.engine:
            await _ingest(context, data, replace=False, qrels=serve)  # for the playground
            return await _first_comparison(context, config, qid, text, relevant)

    chosen = asyncio.run(show())
    label = configured_label(chosen)
    tables = demo_tables(label)
    methods = list(dict.fromkeys(m for labels in tables.values() for m in labels))
    # each pair is labelled once for all methods: a demo on two cores cannot pay it 6 times;
    # from the corpus vectors when they cost less, as eval decides
    reports = asyncio.run(_evaluate(target, data, None, parse_methods(",".join(methods)),
                                    "test", queries, "default", cold_labels=False,
                                    corpus_vectors=None))
    by_label = {report.spec.label: report for report in reports}
    for budget, labels in tables.items():
        print_table(
            console,
            f"At {budget} labeler pairs per query: first {queries} {data.name} test queries "
            f"on {engine} (labels shared across methods, so latencies hold only new ones)",
            [by_label[m] for m in labels])
    console.print(Text(f"the index's method: {label}"), soft_wrap=True)
    qrels = data.qrels("test")
    pick = playground_query(by_label["knn"].ndcg_by_query(qrels),
                            by_label[label].ndcg_by_query(qrels))
    console.print(Text(pick.reason()), soft_wrap=True)
    asyncio.run(_show_later_round_find(target, data, by_label["tour-hard"], later_round_scan))
    if serve:
        _serve_playground(config, data.name, pick.qid, data.queries("test")[pick.qid], listen,
                          chosen.method)


def demo_sidecar(target: EngineTarget) -> ServerConfig:
    """The sidecar the demo serves, in front of `target`, with the playground it ends on."""
    return ServerConfig(upstream=target.url, engine=target.engine, upstream_tls=target.tls,
                        playground=True)


async def _first_comparison(context: SearchContext, config: ServerConfig, qid: str,
                            text: str, relevant: Mapping[str, int]) -> Resolved:
    """Apply the recommended settings, then show the query's top 5 by knn and bm25 against
    the method the index's settings now name, relevant hits marked; returns that method."""
    chosen = await _apply_settings(console, context.engine, context.index, FRONTIER_20,
                                   FRONTIER_WHY, config)
    console.print(f"\n[bold]query {qid}:[/] {text}")
    configured = _resolved_context(context, chosen)
    for label, method, method_context, options, note in (
            ("knn", "knn", context, {}, ""), ("bm25", "bm25", context, {}, ""),
            (configured_label(chosen), chosen.method, configured, chosen.options,
             " [italic](the index's method)[/]")):
        result = await build(method, method_context, options).search(text, 5)
        console.print(Text.from_markup(f"[bold]{escape(label)}[/]{note} "
                                       f"({result.pairs_scored} pairs scored)"),
                      soft_wrap=True)
        for rank, hit in enumerate(result.hits, start=1):
            mark = "[green]✓ relevant[/]" if hit.id in relevant else ""
            console.print(f"  {rank}. {hit.id} {hit.source.get('title', '')[:80]} {mark}")
    return chosen


def configured_label(chosen: Resolved) -> str:
    """The method and options the index's settings resolve to, as the demo tables' label:
    the one the tables already name when it is the same method (DEMO_BUDGETS), else
    `name:key=value...`."""
    for labels in DEMO_BUDGETS.values():
        for label in labels:
            spec = MethodSpec.parse(label)
            if (spec.name, spec.options) == (chosen.method, chosen.options):
                return label
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return ":".join([chosen.method, *(f"{key}={text(value)}" for key, value
                                      in sorted(chosen.options.items()))])


def demo_tables(configured: str) -> dict[int, tuple[str, ...]]:
    """Budget -> the labels of its table: the first stages, the budget's methods
    (DEMO_BUDGETS) and the index's configured method, at its budget (20 when it names
    none), when no table holds it already."""
    tables: dict[int, tuple[str, ...]] = {
        budget: (*DEMO_FIRST_STAGE, *labels) for budget, labels in DEMO_BUDGETS.items()}
    if any(configured in labels for labels in tables.values()):
        return tables
    budget = MethodSpec.parse(configured).options.get("budget")
    budget = budget if budget in tables else 20
    tables[budget] = (*tables[budget], configured)
    return tables


def _later_round_find(result: SearchResult, relevant: Mapping[str, int]
                      ) -> tuple[int, RankedHit] | None:
    """(rank, hit) of the first relevant doc in the top 10 that a round after round 0
    retrieved and labelled: what TOUR adds over reranking round 0's kNN."""
    for rank, hit in enumerate(result.hits[:10], start=1):
        if hit.round and hit.label is not None and relevant.get(hit.id, 0) > 0:
            return rank, hit
    return None


async def _show_later_round_find(target: EngineTarget, data: BeirDataset,
                                 report: MethodReport, scan: int) -> None:
    """The first query of the demo's sample with a later round's find; past the sample,
    the method runs on up to `scan` more test queries until one has one."""
    from es_tour.pipeline import build_method

    qrels, queries = data.qrels("test"), data.queries("test")
    found = next(((qid, find) for qid, result in report.results.items()
                  if (find := _later_round_find(result, qrels.get(qid, {})))), None)
    if found is None:
        context = _context(target, data.name, "default")
        async with context.engine:
            method = build_method(report.spec.name, context, report.spec.options)
            for qid in list(queries)[len(report.results):][:scan]:
                find = _later_round_find(await method.search(queries[qid], 10),
                                         qrels.get(qid, {}))
                if find:
                    found = (qid, find)
                    break
    if found is None:
        console.print("\nNo relevant doc in these queries' top 10 came from a later round.")
        return
    qid, (rank, hit) = found
    console.print(f"\n[bold]A later round at work[/] ({report.spec.label}, query {qid}: "
                  f"{queries[qid]})\n  round {hit.round} retrieved relevant doc {hit.id} "
                  f"({hit.source.get('title', '')[:70]}), which round 0's kNN top 10 did "
                  f"not hold; it ranks {rank}.")


def _serve_playground(config: ServerConfig, index: str, qid: str, query: str, listen: str,
                      method: str) -> None:
    """The sidecar in the foreground; the playground's URL is printed once it listens, on
    the query with knn on the left and the index's configured `method` on the right (its
    options are the index's settings, as for any search that names only the method)."""
    from es_tour.cli.serve import serve_until_stopped

    link = playground_link(listen, index, query, method)

    def ready() -> None:
        console.print(f"\n[bold]playground[/] (the sidecar in front of {config.upstream}; "
                      f"knn against the index's method {method}, with its settings, on query "
                      f"{qid}; Ctrl-C stops it):\n{link}", soft_wrap=True)

    serve_until_stopped(config, listen, "warning", ready)


CHANGED = 1e-9  # an nDCG@10 gain smaller than this is no change (float noise)


@dataclass(frozen=True)
class PlaygroundPick:
    """The test query the demo's playground opens on, and the figures that chose it."""

    qid: str
    knn: float  # its nDCG@10 by knn
    method: float  # and by the index's method
    better: int  # queries of the sample whose nDCG@10 the method raised over knn's
    worse: int  # and lowered
    sample: int

    def reason(self) -> str:
        """Which query the playground opens on and why, in one line."""
        if not self.better + self.worse:
            return (f"the playground opens on query {self.qid}, the sample's first: the "
                    f"index's method left the nDCG@10 of all {self.sample} test queries at "
                    "knn's")
        changed = self.better + self.worse
        return (f"the playground opens on query {self.qid}: nDCG@10 {self.knn:.3f} by knn, "
                f"{self.method:.3f} by the index's method ({self.method - self.knn:+.3f}), "
                f"the median gain of the {changed} of {self.sample} test queries whose "
                f"nDCG@10 it changed ({self.better} up, {self.worse} down)")


def playground_query(knn: Mapping[str, float], method: Mapping[str, float]
                     ) -> PlaygroundPick:
    """The query whose nDCG@10 gain of `method` over `knn` is the median of the queries
    whose nDCG@10 the method changed: the lower middle one of an even count, an equal gain
    ordered by the queries' order in `knn`; the first query when it changed none.

    `knn`, `method`: query id -> nDCG@10 over the same queries."""
    gains = [(method[qid] - score, order, qid) for order, (qid, score) in enumerate(knn.items())]
    changed = sorted(gain for gain in gains if abs(gain[0]) > CHANGED)
    better = sum(gain > 0 for gain, _, _ in changed)
    if changed:
        qid = changed[(len(changed) - 1) // 2][2]
    else:
        qid = next(iter(knn))
    return PlaygroundPick(qid, knn[qid], method[qid], better, len(changed) - better, len(knn))


def playground_link(listen: str, index: str, query: str, method: str) -> str:
    """The playground on `query`, knn on the left and `method` on the right."""
    return f"http://{listen}/_tour/playground?" + urlencode(
        {"index": index, "q": query, "left": "knn", "right": method})
