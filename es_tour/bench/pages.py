"""What a later page of a refined search costs the cluster, against the engine's own later
page (docs/benchmarks/pages.md).

    python -m es_tour.bench.pages --dataset ../shared/datasets/scifact

An application pages by sending its search again with another `from`. Each query text goes
as pages 1, 2 and 3 (`from` 0, 10 and 20, 10 hits each) on one kept-alive connection, as an
application's client sends them: straight to the engine (the plain match), through a sidecar
with its defaults (it keeps a refinement's ranking for `--ranking-cache-ttl`), and
through one that keeps none (`--ranking-cache-ttl 0`), side by side on `make bench-app`'s
`scifact-app` with its own method. Engine calls and bytes come from sidecars of their own
whose upstream is a counting relay; CPU and latency from the others, straight to the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._commands import bench_parser, parsed_command, write_report
from es_tour.bench._load_page import INDEX, cell
from es_tour.bench._machine import machine, now
from es_tour.bench._relay import CountingRelay, Traffic
from es_tour.bench._sidecar import SidecarProcess
from es_tour.bench.load import (
    CpuClock,
    Row,
    Side,
    TextStream,
    app_client,
    merge,
    prepared,
    query_texts,
    read_ahead,
    settle,
)

PAGE_SIZE = 10
PAGES = (1, 2, 3)
# the sides, in the page's order: the engine, then a sidecar keeping rankings or not
SIDES = {"engine": "plain match", "kept": "index's method, rankings kept (the default)",
         "unkept": "index's method, none kept (`--ranking-cache-ttl 0`)"}
ROW = Row("index's method", "index")  # the application's search with no `ext`


@dataclass(frozen=True)
class Plan:
    """How many texts each pass pages through."""

    batches: int = 4
    batch: int = 50  # texts paged through together: each page's CPU is read over a batch
    counted: int = 10
    warmup_batches: int = 1  # sent first and not measured: a fresh engine's JIT warms up


def page_body(text: str, page: int) -> dict[str, Any]:
    """The application's search for `text` (its hits with no `_source`), at `page`."""
    return {"query": {"match": {"text": text}}, "_source": False,
            "from": (page - 1) * PAGE_SIZE, "size": PAGE_SIZE}


def send(client: httpx.Client, url: str, text: str, page: int) -> tuple[float, bool]:
    """(ms, whether the sidecar cut it from a kept ranking) of one page."""
    started = time.perf_counter()
    response = client.post(f"{url}/{INDEX}/_search", json=page_body(text, page))
    ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return ms, bool(response.json().get("ext", {}).get("tour", {}).get("ranking_reused"))


@dataclass
class PageRun:
    """One side's raw figures for one page number, nothing divided yet."""

    latencies_ms: list[float] = field(default_factory=list)
    reused: int = 0  # of the CPU passes' answers
    searches: int = 0  # in the CPU passes
    engine_cpu_ms: float = 0.0
    engine_wall_s: float = 0.0
    sidecar_cpu_s: float | None = None
    traffic: Traffic = field(default_factory=Traffic)
    counted: int = 0  # searches in the counting pass

    def count(self, traffic: Traffic) -> None:
        self.traffic.requests += traffic.requests
        self.traffic.bytes_received += traffic.bytes_received
        self.traffic.calls.update(traffic.calls)
        self.counted += 1


def per_page(side: str, page: int, run: PageRun, idle_ms_per_s: float) -> dict[str, Any]:
    """One side's figures per search of one page: engine CPU less the engine's idle rate
    over the same wall time, sidecar CPU, engine calls and KB, p50 and the share reused."""
    busy = run.engine_cpu_ms - idle_ms_per_s * run.engine_wall_s
    latency = np.asarray(run.latencies_ms)
    return {
        "side": side, "page": page, "searches": run.searches,
        "engine_cpu_ms": round(busy / run.searches, 3) if run.searches else None,
        "sidecar_cpu_ms": None if run.sidecar_cpu_s is None or not run.searches
        else round(run.sidecar_cpu_s * 1000 / run.searches, 3),
        "engine_calls": round(run.traffic.requests / run.counted, 2) if run.counted else None,
        "kb_received": round(run.traffic.bytes_received / 1024 / run.counted, 1)
        if run.counted else None,
        "calls": {call: round(n / run.counted, 2)
                  for call, n in run.traffic.calls.most_common()} if run.counted else {},
        "p50_ms": round(float(np.median(latency)), 1) if latency.size else None,
        "reused": round(run.reused / run.searches, 3) if run.searches else None,
    }


def count_pass(runs: Mapping[str, dict[int, PageRun]], sides: Mapping[str, Side],
               relay: CountingRelay, plan: Plan) -> None:
    """Each side's texts paged through one at a time, every page's traffic on the wire
    (sidecars whose upstream is the relay; the engine through the relay itself)."""
    with app_client() as client:
        for name, side in sides.items():
            if side.cpu_s is not None:  # a sidecar: its workers read ahead first
                read_ahead(client, side, ROW)
            for text in side.texts.take(plan.counted):
                for page in PAGES:
                    relay.reset()
                    send(client, side.url, text, page)
                    runs[name][page].count(relay.reset())


def cpu_pass(runs: Mapping[str, dict[int, PageRun]], sides: Mapping[str, Side],
             clock: CpuClock, plan: Plan) -> None:
    """Batches of texts, each side in turn (the first rotating, so a drift in the machine's
    load reaches every side alike): a batch's page 1 for every text, then its page 2, then
    page 3, the engine's and the sidecar's CPU read around each, each page's latency kept,
    after `warmup_batches` unmeasured. A batch's pages follow each other within seconds,
    well inside a kept ranking's TTL."""
    with app_client() as client:
        for side in sides.values():
            if side.cpu_s is not None:
                read_ahead(client, side, ROW)
        for side in sides.values():
            for text in side.texts.take(plan.warmup_batches * plan.batch):
                for page in PAGES:
                    send(client, side.url, text, page)
        clock.idle()
        names = list(sides)
        for batch in range(plan.batches):
            for name in [*names[batch % len(names):], *names[:batch % len(names)]]:
                side = sides[name]
                texts = side.texts.take(plan.batch)
                for page in PAGES:
                    run = runs[name][page]
                    own = side.cpu_s
                    cpu0, t0 = clock.read()
                    own0 = own() if own is not None else 0.0
                    for text in texts:
                        ms, reused = send(client, side.url, text, page)
                        run.latencies_ms.append(ms)
                        run.reused += reused
                    cpu1, t1 = clock.read()
                    if own is not None:
                        run.sidecar_cpu_s = (run.sidecar_cpu_s or 0.0) + own() - own0
                    run.engine_cpu_ms += cpu1 - cpu0
                    run.engine_wall_s += t1 - t0
                    run.searches += len(texts)
            clock.idle()


def start_sides(stack: ExitStack, engine: str, upstream: str, texts: Sequence[str]
                ) -> dict[str, Side]:
    """The engine, and the two sidecars (each on `es-tour serve`'s default workers)."""
    from es_tour.server._config import ServerConfig
    from es_tour.server._workers import default_workers

    sides = {"engine": Side(upstream, None, TextStream(texts))}
    for name in ("kept", "unkept"):
        config = ServerConfig(upstream=upstream, engine=engine, workers=default_workers())
        server = SidecarProcess(config if name == "kept" else replace(
            config, ranking_cache_ttl_s=0), startup_timeout_s=300)
        stack.enter_context(server)
        sides[name] = Side(server.url, server.cpu_seconds, TextStream(texts))
    return sides


def measure(engine: str, url: str, texts: Sequence[str], plan: Plan) -> dict[str, Any]:
    """Every side's pages on one engine: counted through the relay, then CPU and latency."""
    runs = {name: {page: PageRun() for page in PAGES} for name in SIDES}
    relay = CountingRelay(url)
    with relay as relay_url, ExitStack() as stack:
        count_pass(runs, start_sides(stack, engine, relay_url, texts), relay, plan)
    with ExitStack() as stack, httpx.Client(timeout=60) as client:
        sides = start_sides(stack, engine, url, texts)
        settle(client, url)
        clock = CpuClock(client, url)
        cpu_pass(runs, sides, clock, plan)
        version = client.get(f"{url}/_nodes/_local",
                             params={"filter_path": "nodes.*.version"}).json()
        kept = client.get(f"{sides['kept'].url}/_tour/stats").json()["es_tour"]
    return {"engine": engine, "version": next(iter(version["nodes"].values()))["version"],
            "idle_cpu_ms_per_s": round(clock.idle_ms_per_s, 2),
            "rankings_kept": int(kept["rankings_kept"]),
            "rankings_kept_bytes": int(kept["rankings_kept_bytes"]),
            "rows": [per_page(name, page, run, clock.idle_ms_per_s)
                     for name, pages in runs.items() for page, run in pages.items()]}


def table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One engine's rows, each against the plain match's same page."""
    plain = {row["page"]: row for row in rows if row["side"] == "engine"}
    lines = ["| search | page | engine CPU ms / search | × plain match's page | sidecar CPU "
             "ms / search | engine calls / search | KB from engine / search | p50 ms | × "
             "plain match's page | cut from a kept ranking |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        base = plain[row["page"]]
        cpu_x = (row["engine_cpu_ms"] / base["engine_cpu_ms"]
                 if row["engine_cpu_ms"] is not None and base["engine_cpu_ms"] else None)
        p50_x = (row["p50_ms"] / base["p50_ms"]
                 if row["p50_ms"] is not None and base["p50_ms"] else None)
        reused = "–" if row["side"] == "engine" else f"{row['reused']:.0%}"
        lines.append(
            f"| {SIDES[row['side']]} | {row['page']} | {cell(row['engine_cpu_ms'], 2)} | "
            f"{cell(cpu_x, 2)} | {cell(row['sidecar_cpu_ms'], 2)} | "
            f"{cell(row['engine_calls'], 2)} | {cell(row['kb_received'])} | "
            f"{cell(row['p50_ms'])} | {cell(p50_x, 2)} | {reused} |")
    return lines


def kept_line(result: Mapping[str, Any]) -> str:
    """What the default sidecar's workers held at the end (`GET /_tour/stats`)."""
    kept, held = result["rankings_kept"], result["rankings_kept_bytes"]
    each = f", {held / kept / 1024:.1f} KB each" if kept else ""
    return (f"At the end the default sidecar's workers kept {kept:,} rankings in "
            f"{held / 2**20:.2f} MiB{each} (`es_tour_rankings_kept_bytes`).")


def markdown(report: Mapping[str, Any]) -> str:
    plan = report["plan"]
    lines = [
        "# What a later page costs", "",
        "Written by `python -m es_tour.bench.pages` (and `make bench-pages`); never edited "
        "by hand.", "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}; machine: {report['machine']}; 1-minute load average "
        f"{report['load_average'][0]:.1f} at the start, {report['load_average'][1]:.1f} at "
        "the end; "
        "engines on the same machine",
        f"- index `{INDEX}` (`make bench-app`'s SciFact, force-merged to one segment), its "
        "own method the budget frontier's 20 labeler pairs: `" + ", ".join(
            f"{key.removeprefix('index.tour.')}={value}"
            for key, value in report["settings"].items()) + "`; labeler store warm",
        f"- each query text is the application's `{{\"query\":{{\"match\":{{\"text\": "
        f"QUERY}}}},\"_source\":false}}` sent as pages 1, 2 and 3 (`from` 0, 10, 20; "
        f"`size` {PAGE_SIZE}) on one kept-alive connection: straight to the engine, or "
        f"through a sidecar of `es-tour serve`'s defaults ({report['workers']} worker "
        "processes) with rankings kept (the default) or none",
        f"- **engine CPU** and **sidecar CPU**: read around each page of {plan['batches']} "
        f"batches of {plan['batch']} texts per side (a batch's page 1 for every text, then "
        "its page 2, then page 3; the sides in turn, the first rotating), after "
        f"{plan['warmup_batches']} unmeasured, the engine's idle rate taken off; **× plain "
        "match's page**: over the engine's own same page",
        f"- **engine calls** and **KB from engine**: {plan['counted']} texts per side "
        "through a counting TCP relay, the upstream of sidecars of their own, every page "
        "counted apart",
        "- **p50**: over the CPU passes' searches, one client; **cut from a kept ranking**: "
        "the share of those answers whose trace says `ranking_reused`",
        "- before either pass each sidecar's workers read their vector store and the "
        "caller's docs ahead (uncounted searches)",
        ""]
    for result in report["engines"]:
        lines += [f"## {result['engine']} {result['version']}", "",
                  f"Engine idle: {result['idle_cpu_ms_per_s']} ms of CPU per second. "
                  + kept_line(result), "",
                  *table(result["rows"]), "", "Engine calls per search, by request:", ""]
        for row in result["rows"]:
            calls = ", ".join(f"{n} × `{call}`" for call, n in row["calls"].items())
            lines.append(f"- {SIDES[row['side']]}, page {row['page']}: {calls}")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, choose_engines=True)
    parser.add_argument("--batches", type=int, default=Plan.batches)
    parser.add_argument("--batch", type=int, default=Plan.batch)
    parser.add_argument("--counted", type=int, default=Plan.counted)
    parser.add_argument("--warmup-batches", type=int, default=Plan.warmup_batches)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/pages.md"))
    args = parser.parse_args(argv)
    from es_tour.datasets import BeirDataset
    from es_tour.recommended import FRONTIER_20
    from es_tour.server._workers import default_workers

    dataset = BeirDataset(args.dataset)
    texts = query_texts(dataset)
    plan = Plan(batches=args.batches, batch=args.batch, counted=args.counted,
                warmup_batches=args.warmup_batches)
    urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    load_start = os.getloadavg()[0]
    engines = []
    for engine in args.engines.split(","):
        prepared(engine, urls[engine], dataset)
        merge(urls[engine], [INDEX])
        engines.append(measure(engine, urls[engine], texts, plan))
    report = {"command": parsed_command("python -m es_tour.bench.pages", args, parser),
              "date": now(), "machine": machine(),
              "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
              "plan": {"batches": plan.batches, "batch": plan.batch, "counted": plan.counted,
                       "warmup_batches": plan.warmup_batches},
              "settings": FRONTIER_20, "workers": default_workers(), "engines": engines}
    write_report(args.output, markdown(report), report)


if __name__ == "__main__":
    main()
