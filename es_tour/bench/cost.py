"""What a refined search costs through the sidecar: with no reuse of the labeler's doc
vectors (the code path before the vector store), with an empty store, and with a warm one,
against `hybrid-linear` (no labeler) through the same sidecar.

    python -m es_tour.bench.cost --dataset ../shared/datasets/scifact \
        --output docs/benchmarks/cost.md

The index is `make bench-app`'s `scifact-app` with the budget frontier's 20-pair settings.
The stream is every distinct SciFact query text, train and test, in a fixed shuffled
order. Each way gets a sidecar with models loaded afresh (nothing in memory):

- **no reuse**: the labeler's caches are emptied before each search and the store is off,
  so every doc a search labels is embedded, as before doc vectors were kept. A search
  costs the same wherever it comes in the stream, so a prefix of it is measured.
- **empty store** (measured first): the store index is deleted, then the whole stream,
  one search at a time, fills it as it goes. Besides its p50 over the stream, the page
  gives the p50 of its first 100 searches, where the store is emptiest.
- **warm store**: `es-tour warm` then stores what the stream did not label, and the whole
  stream runs again.

Throughput is refined searches per second with 4 and 16 clients sending a slice of the
stream at once. Writes the page and a JSON beside it.

`--labeler` measures another labeler (an ensemble: every member's store is deleted,
warmed and read) and `--ways` some of the ways (hybrid-linear is always measured, in the
same run). Such a run writes its own section of the page, between markers, and its JSON
as cost-<labeler>.json; the default labeler's run rewrites the rest of the page and keeps
those sections:

    python -m es_tour.bench.cost --dataset ../shared/datasets/scifact --queries 300 \
        --labeler 'bge-small-en-v1.5^1+e5-small-v2^0.25' --ways warm-store --engines opensearch
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._commands import bench_parser, parsed_command, write_report
from es_tour.bench._machine import machine, now
from es_tour.bench.app import INDEX, ndcg_at_10, prepare, warm_store
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.evaluation import progress_bar
from es_tour.models import DualEncoderLabeler, EnsembleLabeler, vector_labelers
from es_tour.pipeline import store_index
from es_tour.recommended import FRONTIER_20, FRONTIER_LABEL
from es_tour.server import BackgroundServer, Models, ServerConfig

WAYS = ("no-reuse", "empty-store", "warm-store")
RUN_ORDER = ("empty-store", "warm-store", "no-reuse")  # empty first: see main
DEFAULT_LABELER = "default"
SECTION = "<!-- cost with labeler {}: python -m es_tour.bench.cost --labeler -->"
SECTION_END = "<!-- end of cost with labeler {} -->"
NO_REUSE_QUERIES = 150  # a prefix: each search costs the same, wherever it comes
EMPTIEST_QUERIES = 100  # the empty store's first searches: the stream's dearest
BASELINE_QUERIES = 300
THROUGHPUT_QUERIES = 64
CLIENTS = (4, 16)
DEADLINE_MS = 300_000  # nothing may degrade: a degraded answer would cost less


@dataclass
class Stream:
    """(query id, text) in replay order; `test` maps the test queries' ids to their qrels."""

    queries: list[tuple[str, str]]
    test: dict[str, dict[str, int]]


def stream(dataset: BeirDataset, seed: int = 0) -> Stream:
    """Every distinct query text of train and test, shuffled with a fixed seed."""
    texts: dict[str, str] = {}
    for split in ("train", "test"):
        for qid, text in sorted(dataset.queries(split).items()):
            texts.setdefault(text, qid)
    queries = sorted((qid, text) for text, qid in texts.items())
    random.Random(seed).shuffle(queries)
    test = dataset.qrels("test")
    return Stream(queries, {qid: dict(test[qid]) for qid, _ in queries if qid in test})


def quantiles(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    q = np.quantile(values, [0.5, 0.95, 0.99])
    return {"n": len(values), "p50_ms": round(float(q[0]), 1), "p95_ms": round(float(q[1]), 1),
            "p99_ms": round(float(q[2]), 1)}


def _search(client: httpx.Client, url: str, text: str, tour: Mapping[str, Any] | None = None
            ) -> tuple[float, list[str], dict[str, Any]]:
    """(ms, top-10 ids, ext.tour) of one search through the sidecar."""
    body: dict[str, Any] = {"query": {"match": {"text": text}}, "size": 10, "_source": False}
    if tour is not None:
        body["ext"] = {"tour": dict(tour)}
    started = time.perf_counter()
    response = client.post(f"{url}/{INDEX}/_search", json=body)
    ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    answer = response.json()
    return ms, [h["_id"] for h in answer["hits"]["hits"]], answer.get("ext", {}).get("tour", {})


def _stats(client: httpx.Client, url: str) -> dict[str, Any]:
    return dict(client.get(f"{url}/_tour/stats").json()["es_tour"])


@dataclass
class WayRun:
    way: str
    latencies: list[float]
    runs: dict[str, list[str]]  # query id -> top 10
    degraded: int
    model_s_per_search: float
    store_hit_rate: float | None
    docs_embedded: int  # by the one-at-a-time searches, as is the model time
    model_ms_per_doc: float | None  # their model time (query encodings too) a doc embedded
    throughput: dict[int, float]  # clients -> refined searches per second


def members(models: Models, labeler: str) -> list[DualEncoderLabeler]:
    """The dual encoders whose doc vectors `labeler` stores: itself, or an ensemble's."""
    found = vector_labelers(models.labeler(labeler))
    if not found:
        raise SystemExit(f"labeler {labeler!r} has no doc vectors to store")
    return found


def replay(engine: str, url: str, way: str, queries: Sequence[tuple[str, str]],
           throughput_queries: Sequence[tuple[str, str]], label: str,
           labeler_name: str = DEFAULT_LABELER) -> WayRun:
    """One way over `queries` one at a time, then over `throughput_queries` (if any) at
    each of CLIENTS; a sidecar with its own freshly loaded models, labelling with
    `labeler_name` (the index sets no labeler of its own)."""
    models = Models("retriever")
    models.preload(labeler_name)
    labeler = models.labeler(labeler_name)
    members(models, labeler_name)
    assert isinstance(labeler, DualEncoderLabeler | EnsembleLabeler)
    # no reuse: the labeler's caches (an ensemble's and its members') emptied each search
    forget = labeler.clear_cache if way == "no-reuse" else (lambda: None)
    # no ranking kept for a later page: a throughput slice sends texts again
    config = ServerConfig(upstream=url, engine=engine, deadline_ms=DEADLINE_MS,
                          max_timeout_ms=DEADLINE_MS, vector_store=way != "no-reuse",
                          labeler=labeler_name, ranking_cache_ttl_s=0)
    latencies: list[float] = []
    runs: dict[str, list[str]] = {}
    degraded = 0
    with BackgroundServer(config, models) as sidecar, httpx.Client(timeout=600) as client:
        with progress_bar(f"{engine} {way}", len(queries)) as advance:
            for qid, text in queries:
                forget()
                ms, top, tour = _search(client, sidecar.url, text)
                latencies.append(ms)
                runs[qid] = top
                degraded += bool(tour.get("degraded"))
                advance(label)
        stats = _stats(client, sidecar.url)
        throughput = {clients: _throughput(sidecar.url, throughput_queries, clients, forget)
                      for clients in CLIENTS if throughput_queries}
    answered = sum(stats["refined"].get("by_method", {}).values()) + sum(
        stats["degraded"].get("by_method", {}).values())
    model_s, embedded = stats["model_seconds"]["total"], stats["labeler_docs_embedded"]["total"]
    return WayRun(way, latencies, runs, degraded, model_s / max(answered, 1),
                  stats["vector_store"]["hit_rate"], embedded,
                  model_s * 1000 / embedded if embedded else None, throughput)


def _throughput(url: str, queries: Sequence[tuple[str, str]], clients: int,
                forget: Callable[[], None]) -> float:
    """Refined searches per second with `clients` sending `queries` at once."""
    def one(text: str) -> bool:
        forget()
        with httpx.Client(timeout=600) as client:
            _, _, tour = _search(client, url, text)
        return not tour.get("degraded")

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        refined = sum(pool.map(one, [text for _, text in queries]))
    return round(refined / (time.perf_counter() - started), 3)


def baseline(engine: str, url: str, queries: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """hybrid-linear (BM25 and kNN, no labeler) through the same kind of sidecar."""
    models = Models("retriever")
    config = ServerConfig(upstream=url, engine=engine, deadline_ms=DEADLINE_MS,
                          max_timeout_ms=DEADLINE_MS, preload=False, ranking_cache_ttl_s=0)
    with BackgroundServer(config, models) as sidecar, httpx.Client(timeout=600) as client:
        for _, text in queries[:5]:  # load the query encoder first
            _search(client, sidecar.url, text, {"method": "hybrid-linear"})
        latencies = [_search(client, sidecar.url, text, {"method": "hybrid-linear"})[0]
                     for _, text in queries]
    return quantiles(latencies)


def delete_store(engine: str, url: str, labeler: str = DEFAULT_LABELER) -> list[str]:
    """Delete the store of `labeler` (each member's, for an ensemble)."""
    names = [store_index(member) for member in members(Models("retriever"), labeler)]

    async def run() -> None:
        async with connect(engine, url) as adapter:
            for name in names:
                await adapter.delete_index(name)

    asyncio.run(run())
    return names


def summarise(engine: str, version: str, ways: Mapping[str, WayRun], linear: Mapping[str, Any],
              data: Stream, warm: Mapping[str, Any], emptiest: int) -> dict[str, Any]:
    """One engine's figures, with nDCG@10 on the test queries each way ran; `emptiest`: how
    many of the empty store's first searches make its emptiest p50."""
    out: dict[str, Any] = {"engine": engine, "version": version, "hybrid_linear": linear,
                           "warm": warm, "ways": {}}
    if "empty-store" in ways:
        out["emptiest"] = quantiles(ways["empty-store"].latencies[:emptiest])
    for way, run in ways.items():
        judged = {qid: rels for qid, rels in data.test.items() if qid in run.runs}
        out["ways"][way] = {
            **quantiles(run.latencies), "degraded": run.degraded,
            "model_s_per_search": round(run.model_s_per_search, 3),
            "store_hit_rate": run.store_hit_rate, "docs_embedded": run.docs_embedded,
            "model_ms_per_doc": None if run.model_ms_per_doc is None
            else round(run.model_ms_per_doc, 1),
            "throughput": run.throughput,
            "ndcg@10": round(ndcg_at_10(run.runs, judged), 4), "test_queries": len(judged)}
    if "no-reuse" not in ways:
        return out
    # the same test queries, ranked by each way: φ identical means rankings identical
    none = ways["no-reuse"].runs
    shared = [qid for qid in data.test if qid in none]
    out["same_rankings_as_no_reuse"] = {
        way: sum(run.runs.get(qid) == none[qid] for qid in shared) for way, run in ways.items()
        if way != "no-reuse"}
    out["same_rankings_of"] = len(shared)
    return out


def labeler_words(report: Mapping[str, Any]) -> str:
    labeler = report.get("labeler", DEFAULT_LABELER)
    return ("the default (bge-small-en-v1.5, 512 tokens)" if labeler == DEFAULT_LABELER
            else f"`{labeler}` (each member's doc vectors in its own store)")


def markdown(report: Mapping[str, Any]) -> str:
    """The page; a run with another labeler than the default is a section of it."""
    engines = report["engines"]
    ran = [way for way in WAYS if way in report.get("ways", WAYS)]
    section = report.get("labeler", DEFAULT_LABELER) != DEFAULT_LABELER
    h = "##" if section else "#"
    stream_words = {
        "no-reuse": f"no reuse: its first {report['no_reuse_queries']}",
        "empty-store": "empty store (run first): all of it, the store deleted first",
        "warm-store": "warm store: all of it, after `es-tour warm`"}
    lines = [
        f"{h} With the labeler `{report['labeler']}`" if section
        else "# What a refined search costs",
        "",
        "Written by `python -m es_tour.bench.cost` (and `make bench-cost`); never edited by "
        "hand.",
        "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}; machine: {report['machine']}"
        + (f"; 1-minute load average {report['load_average'][0]:.1f} at the start, "
           f"{report['load_average'][1]:.1f} at the end" if "load_average" in report else ""),
        f"- index `{INDEX}` (`make bench-app`'s), settings the budget frontier's 20-pair "
        f"choice: `{FRONTIER_LABEL}`; labeler: {labeler_words(report)}",
        f"- stream: {report['stream']} distinct SciFact query texts (train and test), "
        "shuffled with a fixed seed, one search at a time; "
        + "; ".join(stream_words[way] for way in ran)
        + f"; hybrid-linear (no labeler): its first {BASELINE_QUERIES}; throughput: "
        f"{report['throughput_queries']} searches of the stream sent by 4 and by 16 "
        "clients at once (not for the empty store: it fills as the stream runs, so it "
        "has no steady state)",
        "- each way: a sidecar with its models freshly loaded; deadline "
        f"{DEADLINE_MS // 1000} s, so no search degrades",
        "- model s / search, docs embedded and model ms / doc embedded: of the one-at-a-time "
        "searches; the last is their model time over the docs they embedded, query "
        "encodings included (so a little over a new doc's cost)",
        "",
    ]
    for e in engines:
        w = e["ways"]
        linear = e["hybrid_linear"]["p50_ms"]

        lines += [
            f"{h}# {e['engine']} {e['version']}",
            "",
            "| way | n | p50 ms | p95 ms | p99 ms | searches/s, 4 clients | 16 clients "
            "| model s / search | store hit rate | docs embedded | model ms / doc embedded "
            "| nDCG@10 test (n) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *[f"| {way} | {w[way]['n']} | {_ms(w[way], 'p50_ms')} | {_ms(w[way], 'p95_ms')} | "
              f"{_ms(w[way], 'p99_ms')} | {_rate(w[way], '4')} | {_rate(w[way], '16')} | "
              f"{w[way]['model_s_per_search']:.3f} | "
              + ("–" if w[way]["store_hit_rate"] is None else f"{w[way]['store_hit_rate']:.1%}")
              + f" | {w[way]['docs_embedded']} | {_per_doc(w[way])} | {w[way]['ndcg@10']:.4f} "
              f"({w[way]['test_queries']}) |" for way in WAYS if way in w],
            f"| hybrid-linear (no labeler) | {e['hybrid_linear']['n']} | {linear:.0f} | "
            f"{e['hybrid_linear']['p95_ms']:.0f} | {e['hybrid_linear']['p99_ms']:.0f} | | | | | "
            "| | |",
            "",
        ]
        facts = []
        if "emptiest" in e:
            facts.append(
                f"Empty store, its first {e['emptiest']['n']} searches (the store at its "
                f"emptiest): p50 {e['emptiest']['p50_ms']:.0f} ms"
                + (f", {e['emptiest']['p50_ms'] / w['no-reuse']['p50_ms']:.2f}× no reuse's."
                   if "no-reuse" in w else "."))
        if "warm-store" in w:
            facts.append(
                f"Warm store filled by `es-tour warm`{' after it' if 'empty-store' in w else ''}"
                f": {e['warm']['written']} vectors written, {e['warm']['stored']} already "
                f"stored, {e['warm']['seconds']:.0f} s"
                + (" (the labeler held the model cache's corpus vectors, so warm wrote "
                   "them without embedding: not the time to embed the corpus)."
                   if e["warm"].get("seeded_from_corpus_cache") else "."))
        if "same_rankings_of" in e:
            facts.append(
                f"Rankings identical to no reuse on the {e['same_rankings_of']} test queries "
                "all ways ran: " + ", ".join(
                    f"{way} {n}" for way, n in e["same_rankings_as_no_reuse"].items()) + ".")
        if facts:
            lines += [" ".join(facts), ""]
        lines += ["| figure | measured |", "|---|---|"]
        if "warm-store" in w:
            lines += [_figure("warm p50 against hybrid-linear's",
                              w["warm-store"]["p50_ms"] / linear, "×"),
                      _figure("warm p50", w["warm-store"]["p50_ms"], " ms")]
        if "empty-store" in w and "no-reuse" in w:
            lines.append(_figure("empty-store p50 over the stream against no reuse's",
                                 w["empty-store"]["p50_ms"] / w["no-reuse"]["p50_ms"], "×"))
        if "warm-store" in w and "no-reuse" in w:
            lines.append(_figure("warm searches/s at 16 clients against no reuse's",
                                 w["warm-store"]["throughput"]["16"]
                                 / max(w["no-reuse"]["throughput"]["16"], 1e-9), "×"))
        if "no-reuse" in w:
            lines.append(_figure("no reuse's model ms / doc embedded",
                                 w["no-reuse"]["model_ms_per_doc"], " ms"))
        lines.append("")
    return "\n".join(lines)


def slug(labeler: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", labeler.lower()).strip("-")


def sections(page: str) -> list[str]:
    """The other labelers' sections of a page, markers included, in page order."""
    found = re.finditer(r"<!-- cost with labeler (\S+): .*? -->\n.*?<!-- end of cost with "
                        r"labeler \1 -->", page, flags=re.S)
    return [match.group(0) for match in found]


def write_page(page: Path, report: Mapping[str, Any]) -> None:
    """The default labeler's run: the page, keeping the other labelers' sections, and
    cost.json. Another labeler's: its section of the page (replaced, or added at the end),
    and cost-<labeler>.json."""
    old = page.read_text() if page.is_file() else ""
    labeler = report.get("labeler", DEFAULT_LABELER)
    if labeler == DEFAULT_LABELER:
        kept = sections(old)
        write_report(page, markdown(report) + "".join(f"\n{s}\n" for s in kept), report)
        return
    start, end = SECTION.format(slug(labeler)), SECTION_END.format(slug(labeler))
    block = f"{start}\n{markdown(report)}\n{end}"
    if start in old and end in old:
        text = old[:old.index(start)] + block + old[old.index(end) + len(end):]
    else:
        text = old.rstrip("\n") + "\n\n" + block + "\n"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    data = page.with_name(f"{page.stem}-{slug(labeler)}.json")
    data.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {page} (section {slug(labeler)}) and {data}")


def _ms(way: Mapping[str, Any], key: str) -> str:
    return "–" if way[key] is None else f"{way[key]:.0f}"


def _per_doc(way: Mapping[str, Any]) -> str:
    return "–" if way["model_ms_per_doc"] is None else f"{way['model_ms_per_doc']:.1f}"


def _rate(way: Mapping[str, Any], clients: str) -> str:
    rate = way["throughput"].get(clients)
    return "–" if rate is None else f"{rate:.2f}"


def _figure(label: str, value: float | None, unit: str) -> str:
    """A row of the figures table; None (no doc embedded, say) is "–"."""
    return f"| {label} | {'–' if value is None else f'{value:.2f}{unit}'} |"


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, choose_engines=True)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/cost.md"))
    parser.add_argument("--queries", type=int, default=None,
                        help="only the first N queries of the stream (a smoke run)")
    parser.add_argument("--no-reuse-queries", type=int, default=NO_REUSE_QUERIES)
    parser.add_argument("--throughput-queries", type=int, default=THROUGHPUT_QUERIES)
    parser.add_argument("--emptiest-queries", type=int, default=EMPTIEST_QUERIES,
                        help="the empty store's first N searches, whose p50 the page gives "
                             "besides the stream's (the store is emptiest there)")
    parser.add_argument("--labeler", default=DEFAULT_LABELER,
                        help="the labeler the refined searches use: a dual encoder or an "
                             "ensemble of them (default: the default labeler); another than "
                             "the default writes its own section of the page")
    parser.add_argument("--ways", default=",".join(RUN_ORDER),
                        help=f"which of {', '.join(RUN_ORDER)} to run (hybrid-linear always "
                             "runs); without empty-store the store is not deleted first and "
                             "`es-tour warm` adds only what it lacks")
    parser.add_argument("--seed-from-corpus-cache", action="store_true",
                        help="before `es-tour warm`, hand the labeler the model cache's "
                             "corpus vectors of --dataset (checked against fresh embeddings "
                             "of a few docs): warm then writes them without embedding; the "
                             "warm time is then not the cost of embedding the corpus")
    args = parser.parse_args(argv)
    chosen_ways = [way.strip() for way in args.ways.split(",") if way.strip()]
    if not chosen_ways or set(chosen_ways) - set(WAYS):
        parser.error(f"--ways takes some of {', '.join(RUN_ORDER)}")
    dataset = BeirDataset(args.dataset)
    data = stream(dataset)
    queries = data.queries[:args.queries]
    sample = queries[:args.throughput_queries]
    urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    summaries = []
    load_start = os.getloadavg()[0]  # another job on the machine slows a refined search most
    for engine in args.engines.split(","):
        url = urls[engine]
        prepare(engine, url, dataset, Models("retriever"))
        version = httpx.get(f"{url}/_nodes/_local?filter_path=nodes.*.version").json()
        version = str(next(iter(version["nodes"].values()))["version"])
        linear = baseline(engine, url, queries[:BASELINE_QUERIES])
        ways, warm = {}, {}
        if "empty-store" in chosen_ways:
            delete_store(engine, url, args.labeler)
            # empty first: the stream fills most of the store, so `es-tour warm` after it
            # embeds only what no search labelled. No throughput: it has no steady state.
            ways["empty-store"] = replay(engine, url, "empty-store", queries, [], "empty",
                                         args.labeler)
        if "warm-store" in chosen_ways:
            warmed = warm_store(engine, url, Models("retriever"), args.labeler,
                                seed=dataset if args.seed_from_corpus_cache else None)
            warm = {"written": warmed.written, "stored": warmed.stored,
                    "seconds": round(warmed.seconds, 1),
                    "seeded_from_corpus_cache": args.seed_from_corpus_cache}
            ways["warm-store"] = replay(engine, url, "warm-store", queries, sample, "warm",
                                        args.labeler)
        if "no-reuse" in chosen_ways:
            ways["no-reuse"] = replay(engine, url, "no-reuse",
                                      queries[:args.no_reuse_queries], sample, "no reuse",
                                      args.labeler)
        summaries.append(summarise(engine, version, ways, linear, data, warm,
                                   args.emptiest_queries))
        print(json.dumps(summaries[-1]), file=sys.stderr)
    report = {"command": parsed_command("python -m es_tour.bench.cost", args, parser),
              "date": now(), "machine": machine(),
              "stream": len(queries), "no_reuse_queries": min(args.no_reuse_queries,
                                                              len(queries)),
              "throughput_queries": len(sample), "settings": FRONTIER_20,
              "labeler": args.labeler, "ways": [way for way in WAYS if way in ways],
              "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
              "engines": summaries}
    report = json.loads(json.dumps(report))  # int keys as the JSON file holds them
    write_page(args.output, report)


if __name__ == "__main__":
    main()
