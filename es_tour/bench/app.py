"""Application-shaped searches through the sidecar: how many get refined, and whether they
keep the application's filters, facets and highlights.

    python -m es_tour.bench.app --dataset ../shared/datasets/scifact \
        --output docs/benchmarks/app.md [--smoke]

SciFact with synthetic `year` / `topic` metadata is indexed as `scifact-app` on each engine,
with the budget frontier's 20-pair settings (es_tour.recommended.FRONTIER_20: hybrid-tour
over hybrid-linear's pool, fused with w_bm25 0.3). A deterministic workload built from the
test queries (bool queries with filters, multi_match with a filter, should with must_not,
aggregations, highlight, pages 1 and 2, `_msearch` batches, query_string) is replayed
through one sidecar per engine, over the HTTP API as the engines define it: whatever the
sidecar does not refine passes through to the engine, and is measured as such. Writes the
page and `app.json` beside it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import ir_measures
import numpy as np
from ir_measures import nDCG

from es_tour.bench._app_workload import (
    SHAPES,
    SHAPES_PER_QUERY,
    AppRequest,
    Search,
    filtered_qrels,
    violations,
    workload,
)
from es_tour.bench._commands import bench_parser, parsed_command, write_report
from es_tour.bench._machine import machine, now
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.evaluation import progress_bar
from es_tour.ingest import ingest
from es_tour.models import DualEncoderLabeler, doc_key, vector_labelers
from es_tour.models._corpus_cache import cached_corpus_embeddings
from es_tour.models._runtime import l2_normalize
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, WarmReport, warm
from es_tour.recommended import FRONTIER_20, FRONTIER_LABEL
from es_tour.server import PASSTHROUGH_HEADER, BackgroundServer, Models, ServerConfig

INDEX = "scifact-app"
# the baseline at the same budget, plain: the index's fusion weights must not apply to it
BASELINE = {"method": "rerank-hybrid", "k": 20, "w_bm25": 0.0, "w_dense": 0.0}
BASELINE_LABEL = "rerank-hybrid:k=20"
SMOKE_REQUESTS = 40


# ---- replay ------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What the sidecar answered to one request; per-item lists for `_msearch`."""

    request: AppRequest
    status: int
    ms: float
    refined: list[bool]
    reasons: list[str]  # the passthrough reason of each item not refined ("" if refined)
    hits: list[list[dict[str, Any]]]
    errors: int  # items answered with an error
    aggregations: list[Any] = field(default_factory=list)
    degraded: int = 0


def passthrough_reason(headers: Mapping[str, str]) -> str | None:
    return headers.get(PASSTHROUGH_HEADER)


def _answers(request: AppRequest, response: httpx.Response) -> list[dict[str, Any]]:
    """The response body of each item: the msearch items, or the search itself."""
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    if request.msearch:
        items = payload.get("responses", [])
        return [*items, *[{} for _ in range(len(request.items) - len(items))]]
    return [payload]


def _msearch_body(index: str, searches: Sequence[Search]) -> bytes:
    lines = [json.dumps(line) for s in searches for line in ({"index": index}, s.body)]
    return ("\n".join(lines) + "\n").encode()


def send(client: httpx.Client, base: str, index: str, request: AppRequest) -> Outcome:
    """Send one request to `base` and read the refinement status of each item.

    An item is refined when it carries `ext.tour`; a `_search` must also lack the
    passthrough header (an `_msearch` item has no headers of its own)."""
    started = time.perf_counter()
    if request.msearch:
        response = client.post(f"{base}/_msearch", content=_msearch_body(index, request.items),
                               headers={"Content-Type": "application/x-ndjson"})
    else:
        response = client.post(f"{base}/{index}/_search", json=request.items[0].body)
    ms = (time.perf_counter() - started) * 1000
    header = passthrough_reason(response.headers)
    outcome = Outcome(request, response.status_code, ms, [], [], [], 0)
    for answer in _answers(request, response):
        failed = response.status_code != 200 or "error" in answer or "hits" not in answer
        tour = answer.get("ext", {}).get("tour") if isinstance(answer.get("ext"), dict) else None
        refined = not failed and tour is not None and (request.msearch or header is None)
        outcome.errors += failed
        outcome.refined.append(refined)
        outcome.reasons.append("" if refined else
                               "error" if failed else header or "no reason given")
        outcome.hits.append([] if failed else answer["hits"]["hits"])
        outcome.aggregations.append(answer.get("aggregations"))
        outcome.degraded += bool(tour and tour.get("degraded"))
    return outcome


def stored_metadata(client: httpx.Client, url: str, index: str) -> dict[str, dict[str, Any]]:
    """doc id -> {year, topic} as the engine stores them, read once: what filters judge."""
    count = client.get(f"{url}/{index}/_count").json()["count"]
    response = client.post(f"{url}/{index}/_search", json={
        "size": count, "_source": ["year", "topic"], "query": {"match_all": {}}})
    response.raise_for_status()
    return {hit["_id"]: hit["_source"] for hit in response.json()["hits"]["hits"]}


@dataclass
class EngineRun:
    engine: str
    version: str
    outcomes: list[Outcome]
    metadata: dict[str, dict[str, Any]]
    agg_diffs: int
    agg_checked: int
    baselines: dict[str, list[str]]  # request id -> rerank-hybrid's top ids
    baseline_failures: Counter[str]
    seconds: float


def prepare(engine: str, url: str, dataset: BeirDataset, models: Models) -> None:
    """Index the dataset with metadata (skipped when complete) and apply the frontier's
    settings."""
    async def run() -> None:
        async with connect(engine, url) as adapter:
            await ingest(adapter, dataset, INDEX, models.encoder, if_missing=True,
                         metadata=True)
            await adapter.refresh(INDEX)

    asyncio.run(run())
    response = httpx.put(f"{url}/{INDEX}/_settings", json=FRONTIER_20, timeout=60)
    response.raise_for_status()


def warm_store(engine: str, url: str, models: Models, labeler: str = "default",
               seed: BeirDataset | None = None) -> WarmReport:
    """Fill the vector store of `labeler` (each member's, for an ensemble) for the index, as
    `es-tour warm` does (what is stored already is skipped). With `seed`, each member
    first holds the model cache's corpus vectors of that dataset (`seed_from_corpus_cache`),
    so warm writes those without embedding them."""
    loaded = models.labeler(labeler)
    if seed is not None:
        seed_from_corpus_cache(vector_labelers(loaded), seed)

    async def run() -> WarmReport:
        async with connect(engine, url) as adapter:
            return await warm(adapter, INDEX, loaded, DEFAULT_TEXT_FIELDS)

    return asyncio.run(run())


def seed_from_corpus_cache(members: Sequence[DualEncoderLabeler], dataset: BeirDataset,
                           check: int = 8) -> dict[str, int]:
    """Hand each member the unit doc vectors its model cache holds for `dataset`'s corpus
    (`es_tour.models.cached_corpus_embeddings`: the same encoder, precision, length and
    prefix), kept under this index's doc keys. A key carries its text's digest, so a doc
    whose indexed text is not the corpus text is not matched: warm embeds it. The first
    `check` docs are embedded afresh and must match. Returns member -> vectors handed."""
    docs = list(dataset.corpus())
    texts = [doc.contents for doc in docs]
    handed: dict[str, int] = {}
    for member in members:
        cached = cached_corpus_embeddings(member.encoder, dataset.root / "corpus.jsonl", texts)
        if cached is None:
            handed[member.name] = 0
            continue
        unit = l2_normalize(cached[0])
        fresh = l2_normalize(member.encoder.encode_docs(texts[:check]))
        if not np.allclose(fresh, unit[:check], atol=1e-3):
            raise RuntimeError(f"{member.name}'s cached corpus vectors are not what it embeds")
        member.remember({doc_key(INDEX, doc.id, doc.contents): vector
                         for doc, vector in zip(docs, unit, strict=True)})
        handed[member.name] = len(docs)
    return handed


def _baseline_body(search: Search) -> dict[str, Any]:
    """The same query and filters, ranked by the baseline (aggs and highlight do not change
    the hits)."""
    body = {k: v for k, v in search.body.items() if k not in ("aggs", "highlight")}
    return {**body, "ext": {"tour": BASELINE}}


def replay(engine: str, url: str, requests: Sequence[AppRequest], models: Models,
           deadline_ms: int) -> EngineRun:
    started = time.perf_counter()
    config = ServerConfig(upstream=url, engine=engine, deadline_ms=deadline_ms,
                          max_timeout_ms=deadline_ms)
    outcomes: list[Outcome] = []
    baselines: dict[str, list[str]] = {}
    failures: Counter[str] = Counter()
    agg_diffs = agg_checked = 0
    with BackgroundServer(config, models) as sidecar, httpx.Client(timeout=300) as client:
        nodes = client.get(f"{url}/_nodes/_local?filter_path=nodes.*.version").json()
        version = str(next(iter(nodes["nodes"].values()))["version"])
        metadata = stored_metadata(client, url, INDEX)
        judged = [r for r in requests if not r.msearch and r.items[0].first_page]
        total = len(requests) + len(judged)
        with progress_bar(f"{engine}", total) as advance:
            for request in requests:
                outcome = send(client, sidecar.url, INDEX, request)
                outcomes.append(outcome)
                for search, aggs in zip(request.items, outcome.aggregations, strict=True):
                    if "aggs" in search.body:  # the engine's own answer to the same body
                        direct = client.post(f"{url}/{INDEX}/_search", json=search.body)
                        agg_checked += 1
                        agg_diffs += aggs != direct.json().get("aggregations")
                advance(request.shape)
            for request in judged:  # the baseline under the same filters, same sidecar
                response = client.post(f"{sidecar.url}/{INDEX}/_search",
                                       json=_baseline_body(request.items[0]))
                if response.status_code == 200:
                    baselines[request.id] = [h["_id"] for h in response.json()["hits"]["hits"]]
                else:
                    failures[_error_reason(response)] += 1
                advance("baseline")
    return EngineRun(engine, version, outcomes, metadata, agg_diffs, agg_checked, baselines,
                     failures, time.perf_counter() - started)


def _error_reason(response: httpx.Response) -> str:
    try:
        reason = response.json()["error"]["reason"]
    except (ValueError, KeyError, TypeError):
        reason = response.text[:80]
    return f"{response.status_code} {reason}"


# ---- the report --------------------------------------------------------------------------

def ndcg_at_10(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
               ) -> float:
    """Mean nDCG@10 over every query of `qrels`; a query the run lacks scores 0."""
    run = [ir_measures.ScoredDoc(qid, doc_id, float(len(ranked) - rank))
           for qid, ranked in runs.items() if qid in qrels
           for rank, doc_id in enumerate(ranked)]
    judged = [ir_measures.Qrel(qid, doc_id, rel)
              for qid, docs in qrels.items() for doc_id, rel in docs.items()]
    scores = {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], judged, run)}
    return float(np.mean([scores.get(qid, 0.0) for qid in qrels])) if qrels else float("nan")


def _quantiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50_ms": None, "p95_ms": None}
    return {"n": len(values), "p50_ms": round(float(np.quantile(values, 0.5)), 1),
            "p95_ms": round(float(np.quantile(values, 0.95)), 1)}


def summarise(run: EngineRun, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The figures the page reports for one engine."""
    units = [refined for o in run.outcomes for refined in o.refined]
    reasons = Counter(reason for o in run.outcomes for reason in o.reasons if reason)
    shapes: dict[str, Counter[str]] = {}
    for o in run.outcomes:
        shapes.setdefault(o.request.shape, Counter()).update(
            "refined" if refined else "passed" for refined in o.refined)
    answered = [(search, hits) for o in run.outcomes
                for search, hits in zip(o.request.items, o.hits, strict=True)]
    bad = sum(violations([h["_id"] for h in hits], search.filters, run.metadata)
              for search, hits in answered)
    missing = sum(not hit.get("highlight", {}).get("text")
                  for search, hits in answered if "highlight" in search.body for hit in hits)
    # nDCG: first-page searches whose query keeps a judged doc under the filters, and whose
    # baseline answered
    judged: dict[str, dict[str, int]] = {}
    frontier: dict[str, list[str]] = {}
    dropped = 0
    for o in run.outcomes:
        search = o.request.items[0]
        if o.request.msearch or not search.first_page or o.request.id not in run.baselines:
            continue
        kept = filtered_qrels(qrels.get(o.request.query_id, {}), search.filters, run.metadata)
        if not kept:
            dropped += 1
            continue
        judged[o.request.id] = kept
        frontier[o.request.id] = [h["_id"] for h in o.hits[0]]
    ndcg_frontier = ndcg_at_10(frontier, judged)
    ndcg_baseline = ndcg_at_10(run.baselines, judged)
    all_refined = [o.ms for o in run.outcomes if all(o.refined)]
    none_refined = [o.ms for o in run.outcomes if not any(o.refined)]
    mixed = [o.ms for o in run.outcomes if any(o.refined) and not all(o.refined)]
    return {
        "engine": run.engine, "version": run.version, "requests": len(run.outcomes),
        "items": len(units), "refined": sum(units),
        "refined_share": round(sum(units) / max(len(units), 1), 4),
        "errors": sum(o.errors for o in run.outcomes),
        "degraded": sum(o.degraded for o in run.outcomes),
        "passthrough_reasons": dict(reasons.most_common()),
        "by_shape": {shape: dict(c) for shape, c in shapes.items()},
        "filter_violations": bad,
        "hits_checked": sum(len(h) for o in run.outcomes for h in o.hits),
        "agg_diffs": run.agg_diffs, "agg_checked": run.agg_checked,
        "missing_highlights": missing,
        "ndcg": {"requests": len(judged), "dropped_no_judged_doc": dropped,
                 "baseline_failed": dict(run.baseline_failures),
                 "frontier": round(ndcg_frontier, 4), "baseline": round(ndcg_baseline, 4),
                 "gain": round(ndcg_frontier - ndcg_baseline, 4)},
        "latency": {"refined": _quantiles(all_refined), "passed_through": _quantiles(none_refined),
                    "mixed_msearch": _quantiles(mixed)},
        "seconds": round(run.seconds, 1),
    }


def markdown(report: Mapping[str, Any]) -> str:
    engines = report["engines"]
    header = "| | " + " | ".join(f"{e['engine']} {e['version']}" for e in engines) + " |"
    rule = "|---|" + "---|" * len(engines)

    def row(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |"

    def latency(e: Mapping[str, Any], group: str) -> str:
        q = e["latency"][group]
        return "–" if not q["n"] else f"{q['p50_ms']:.0f} / {q['p95_ms']:.0f} (n={q['n']})"

    lines = [
        "# Application searches through the sidecar",
        "",
        "Written by `python -m es_tour.bench.app` (and `make bench-app`); never edited by hand.",
        "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}; machine: {report['machine']}",
        f"- index `{INDEX}`: SciFact with synthetic `year` / `topic` per doc "
        "(`es-tour index --metadata`), settings the budget frontier's 20-pair choice: "
        f"`{FRONTIER_LABEL}`",
        f"- workload: {report['requests']} requests ({report['items']} searches counting each "
        f"`_msearch` item) from {report['queries']} SciFact test queries, "
        f"{report['shapes_per_query']} shapes each in rotation: {', '.join(SHAPES)}"
        + (" (**smoke run**: a prefix of the workload)" if report["smoke"] else ""),
        "- one sidecar per engine, in the process of the client, sharing one labeler; "
        "requests one at a time",
        "- store state: **warm**. Before its replay, each engine's labeler vector store is "
        "filled for every doc of the index, as `es-tour warm --index scifact-app` does: "
        + "; ".join(f"{e['engine']} `{e['store']['index']}` {e['store']['written_by_warm']} "
                    f"vectors written, {e['store']['already_stored']} already stored "
                    f"({e['store']['warm_seconds']:.0f} s)" for e in engines)
        + ". The sidecar shares the labeler that warm used, so every doc vector is already "
        "in its memory (as in a sidecar that has read each doc from the store once): the "
        "latencies below hold no doc embedding and no store read. The labeler scores the "
        "same pairs either way (φ is identical); only their cost differs, for the frontier "
        "and the baseline alike.",
        "",
        header, rule,
        row("refined (items with `ext.tour`, no passthrough header)",
            [f"{e['refined']} / {e['items']} ({e['refined_share']:.1%})" for e in engines]),
        row("filter violations (hits failing the request's filters)",
            [f"{e['filter_violations']} of {e['hits_checked']} hits" for e in engines]),
        row("aggregations differing from the engine's for the same body",
            [f"{e['agg_diffs']} of {e['agg_checked']}" for e in engines]),
        row("hits missing a requested highlight", [str(e["missing_highlights"]) for e in engines]),
        row(f"nDCG@10, filtered judged set: frontier 20 pairs / `{BASELINE_LABEL}`",
            [f"{e['ndcg']['frontier']:.4f} / {e['ndcg']['baseline']:.4f}" for e in engines]),
        row("nDCG@10 gain", [f"{e['ndcg']['gain']:+.4f} (n={e['ndcg']['requests']})"
                             for e in engines]),
        row("p50 / p95 ms, refined requests", [latency(e, "refined") for e in engines]),
        row("p50 / p95 ms, passed-through requests",
            [latency(e, "passed_through") for e in engines]),
        row("p50 / p95 ms, `_msearch` partly refined",
            [latency(e, "mixed_msearch") for e in engines]),
        row("errors / degraded", [f"{e['errors']} / {e['degraded']}" for e in engines]),
        row("run time", [f"{e['seconds']:.0f} s" for e in engines]),
        "",
        "## By shape (items refined / passed through)",
        "",
        "| shape | " + " | ".join(e["engine"] for e in engines) + " |",
        "|---|" + "---|" * len(engines),
        *[f"| {shape} | " + " | ".join(
            f"{e['by_shape'].get(shape, {}).get('refined', 0)} / "
            f"{e['by_shape'].get(shape, {}).get('passed', 0)}" for e in engines) + " |"
          for shape in SHAPES],
        "",
        "## Why requests passed through",
        "",
        *[f"- {e['engine']}: " + ("; ".join(f"`{reason}` {n}" for reason, n
                                            in e["passthrough_reasons"].items()) or "none")
          for e in engines],
        "",
        "## How it is measured",
        "",
        "- **Filters** are judged on the `year` / `topic` the engine stores for each hit (read "
        "once from the index). Range and term filters are drawn around the metadata of a "
        "judged doc of the query (the first relevant one by id), widths and the excluded "
        "topic from a generator seeded by the query id; `year:Y` in a query_string is a "
        "filter on year = Y.",
        "- **Aggregations** (terms on `topic`, histogram on `year`) are compared, as JSON, "
        "with the engine's answer to the same body sent to it directly.",
        "- **Highlight** asks for `text` with `no_match_size`, so the engine gives every hit "
        "a snippet: a hit without one lost it on the way.",
        f"- **nDCG@10** (ir-measures) on first-page `_search` requests (pages 2 and `_msearch` "
        "items left out), over the query's relevant docs that pass the request's filters; "
        "requests with none left are dropped. The frontier's figure is the workload's own "
        f"answer; the baseline is the same query and filters (aggs and highlight removed) "
        f"with `\"ext\": {{\"tour\": {json.dumps(BASELINE)}}}` through the same sidecar "
        "(weights 0: the index's fusion weights do not apply to it). Requests whose baseline "
        "the sidecar refused are left out of both.",
        *[f"- {e['engine']}: nDCG over {e['ndcg']['requests']} requests; "
          f"{e['ndcg']['dropped_no_judged_doc']} dropped with no judged doc left; baseline "
          "refused: " + ("; ".join(f"`{r}` {n}" for r, n in e["ndcg"]["baseline_failed"].items())
                         or "none") for e in engines],
        "- **Latency** is the client's wall time per HTTP request, grouped by whether all, "
        "none or some of its items were refined.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, choose_engines=True)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/app.md"))
    parser.add_argument("--smoke", action="store_true",
                        help=f"only the first {SMOKE_REQUESTS} requests of the workload")
    parser.add_argument("--requests", type=int, default=None,
                        help="only the first N requests of the workload")
    parser.add_argument("--shapes-per-query", type=int, default=SHAPES_PER_QUERY)
    parser.add_argument("--deadline-ms", type=int, default=60_000,
                        help="the sidecar's refinement deadline (generous: a shared CPU)")
    args = parser.parse_args(argv)
    dataset = BeirDataset(args.dataset)
    qrels = dataset.qrels("test")
    queries = sorted(dataset.queries("test").items())
    requests = workload(queries, qrels, args.shapes_per_query)
    limit = SMOKE_REQUESTS if args.smoke else args.requests
    requests = requests[:limit]
    models = Models("retriever")
    models.preload("default")
    urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    summaries = []
    for engine in args.engines.split(","):
        prepare(engine, urls[engine], dataset, models)
        warmed = warm_store(engine, urls[engine], models)
        run = replay(engine, urls[engine], requests, models, args.deadline_ms)
        summaries.append({**summarise(run, qrels), "store": {
            "index": ",".join(warmed.stores), "docs": warmed.docs,
            "written_by_warm": warmed.written,
            "already_stored": warmed.stored, "warm_seconds": round(warmed.seconds, 1)}})
        print(json.dumps(summaries[-1]), file=sys.stderr)
    report = {
        "command": parsed_command("python -m es_tour.bench.app", args, parser),
        "date": now(), "machine": machine(), "smoke": args.smoke or args.requests is not None,
        "queries": len({r.query_id for r in requests}), "requests": len(requests),
        "items": sum(len(r.items) for r in requests), "shapes_per_query": args.shapes_per_query,
        "settings": FRONTIER_20, "baseline": BASELINE, "engines": summaries,
    }
    write_report(args.output, markdown(report), report)


if __name__ == "__main__":
    main()
