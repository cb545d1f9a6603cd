"""What a search costs the cluster, per method, on each engine: engine and sidecar CPU, engine
calls and bytes, latency, and throughput at saturation (docs/benchmarks/load.md).

    python -m es_tour.bench.load --dataset ../shared/datasets/scifact --baseline 2e9867d \
        --scale 20

Every row sends the application's `match` on `make bench-app`'s `scifact-app`: straight to
the engine, or through the sidecar with `ext.tour` naming a method, or with none (the
index's own method), also through `--baseline REV`'s sidecar, side by side. Engine calls
and bytes come from a separate pass through a counting TCP relay (`_relay`); latency and
CPU passes go straight to the engine. The labeler caches each query's scores, so every
sidecar draws texts that it has not answered lately, and the labelling rows run on
sidecars of their own. `--scale N` repeats the index's method and the plain match on a
copy of the index grown N times (perturbed stored vectors, no re-embedding).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._commands import bench_parser, parsed_command, write_report
from es_tour.bench._grown import grow, sized_cache
from es_tour.bench._load import cpu_seconds
from es_tour.bench._load_page import INDEX, SIZED_ROW, markdown
from es_tour.bench._machine import machine, now
from es_tour.bench._relay import CountingRelay, Traffic
from es_tour.bench._sidecar import RevisionSidecar, SidecarProcess
from es_tour.datasets import BeirDataset

STATS_REFRESH_S = 1.1  # the engine refreshes its process stats once a second
WRITER_FLUSH_S = 1.5  # the vector store writes what it queued every second
LABELER_CACHED_QUERIES = 256  # es_tour.models' per-query score cache
CLIENTS = (4, 16)


@dataclass(frozen=True)
class Row:
    """One way to search: sent by `side` ("engine", or the sidecar named so) on `index`,
    with `tour` as its `ext.tour` (None: no `ext`)."""

    label: str
    side: str
    tour: Mapping[str, Any] | None = None
    index: str = INDEX
    whole_source: bool = False  # the application's search asks its hits' whole `_source`


def main_rows(baseline: str | None, whole_source: bool = False) -> list[Row]:
    """The table's rows: bm25 to rerank-hybrid share a sidecar (one labels), TOUR alone
    and an agent have one each (with the index's k, budget and fusion weights), the index's
    method has its own, with and without its doc cache, the baseline revision's its own;
    each sending the application's search with its hits' whole `_source` or none."""
    rows = [Row("plain match", "engine"),
            *[Row(method, "methods", {"method": method})
              for method in ("bm25", "knn", "hybrid-linear")],
            Row("rerank-hybrid k 20", "methods", {"method": "rerank-hybrid", "k": 20}),
            Row("tour-soft", "tour", {"method": "tour-soft"}),
            Row("tour-agent", "agent", {"method": "tour-agent"}),
            Row("index's method", "index"),
            Row("index's method, no doc cache", "uncached")]
    if baseline:
        rows.append(Row(f"index's method, {baseline}", "baseline"))
    return [replace(row, whole_source=whole_source) for row in rows]


def scale_rows(scaled_index: str, whole_source: bool = False) -> list[Row]:
    """The plain match and the index's method on the index and its grown copy; on the copy
    also the method through a sidecar whose doc cache holds the whole copy (`sized_cache`)."""
    return [Row("plain match", "engine", whole_source=whole_source),
            Row("index's method", "index", whole_source=whole_source),
            Row("plain match", "engine", index=scaled_index, whole_source=whole_source),
            Row("index's method", "index", index=scaled_index, whole_source=whole_source),
            Row(SIZED_ROW, "sized", index=scaled_index, whole_source=whole_source)]


def app_client() -> httpx.Client:
    """A client sending the application's searches as the engines' own clients do, asking
    for no compressed answer (httpx asks gzip by default: the engine would then spend CPU
    compressing a plain match's sources that no row through the sidecar asks it for)."""
    return httpx.Client(timeout=300, headers={"Accept-Encoding": "identity"})


def search_body(text: str, tour: Mapping[str, Any] | None, whole_source: bool = False
                ) -> dict[str, Any]:
    """The application's search, with `ext.tour` when the row names one; its hits with
    no `_source`, or, `whole_source`, with the whole of it (the engine's default)."""
    body: dict[str, Any] = {"query": {"match": {"text": text}}, "size": 10}
    if not whole_source:
        body["_source"] = False
    if tour is not None:
        body["ext"] = {"tour": dict(tour)}
    return body


class TextStream:
    """Query texts in a fixed order, never the same one twice within `gap` draws (the
    labeler's cache), as long as there are more than `gap` texts."""

    def __init__(self, texts: Sequence[str], gap: int = LABELER_CACHED_QUERIES):
        if len(texts) <= gap:
            raise ValueError(f"{len(texts)} texts cannot keep {gap} apart")
        self._texts = list(texts)
        self._next = 0

    def take(self, n: int) -> list[str]:
        out = [self._texts[(self._next + i) % len(self._texts)] for i in range(n)]
        self._next = (self._next + n) % len(self._texts)
        return out

    def skip(self, n: int) -> None:
        self._next = (self._next + n) % len(self._texts)


@dataclass
class Side:
    """Where a row's searches go, and how much CPU its process has used (None: the engine,
    measured on its own)."""

    url: str
    cpu_s: Callable[[], float] | None
    texts: TextStream


# ---- the engine's CPU --------------------------------------------------------------------

def engine_cpu_ms(client: httpx.Client, url: str) -> float:
    """The engine's processes' CPU time so far, summed over its nodes."""
    nodes = client.get(f"{url}/_nodes/stats/process",
                       params={"filter_path": "nodes.*.process.cpu.total_in_millis"}).json()
    return float(sum(n["process"]["cpu"]["total_in_millis"] for n in nodes["nodes"].values()))


@dataclass
class CpuClock:
    """Reads of the engine's CPU a refresh apart, and its idle rate between passes."""

    client: httpx.Client
    url: str
    idle_ms: float = 0.0
    idle_s: float = 0.0

    def read(self) -> tuple[float, float]:
        """(cpu ms, wall time) once the engine's figure is fresh."""
        time.sleep(STATS_REFRESH_S)
        return engine_cpu_ms(self.client, self.url), time.perf_counter()

    def idle(self) -> tuple[float, float]:
        """One idle window, counted in the idle rate; returns its end as a read."""
        cpu0, t0 = self.read()
        cpu1, t1 = self.read()
        self.idle_ms += cpu1 - cpu0
        self.idle_s += t1 - t0
        return cpu1, t1

    @property
    def idle_ms_per_s(self) -> float:
        return self.idle_ms / self.idle_s if self.idle_s else 0.0


# ---- one search, a burst of them, a counted pass -----------------------------------------

def degraded(answer: Mapping[str, Any]) -> bool:
    """A refined answer that gave up on refining (round 0 past the deadline)."""
    tour = answer.get("ext", {}).get("tour", {})
    return bool(tour.get("degraded")) if isinstance(tour, dict) else False


@dataclass
class Burst:
    """What `clients` clients got from sending for a while, until the last one answered."""

    clients: int
    answered: int
    degraded: int
    failed: int
    seconds: float  # until the last answer: a search still running at the end counts

    @property
    def per_s(self) -> float:
        return self.answered / self.seconds


def saturate(url: str, row: Row, texts: Sequence[str], clients: int, seconds: float) -> Burst:
    """`clients` threads, each on its own connection, sending searches back to back for
    `seconds`, each taking the next text (run in a process of its own: the client's GIL
    must not cap the rate). The searches still running then are waited for and counted:
    a refined search under 16 clients can take longer than a short pass."""
    lock = threading.Lock()
    order = itertools.cycle(texts)
    counts = {"answered": 0, "degraded": 0, "failed": 0}
    started = time.perf_counter()
    deadline = started + seconds

    def client() -> None:
        with app_client() as http:
            while time.perf_counter() < deadline:
                with lock:
                    text = next(order)
                try:
                    response = http.post(f"{url}/{row.index}/_search",
                                         json=search_body(text, row.tour, row.whole_source))
                    ok = response.status_code == 200
                    worse = ok and degraded(response.json())
                except httpx.HTTPError:
                    ok, worse = False, False
                with lock:
                    counts["answered" if ok else "failed"] += 1
                    counts["degraded"] += worse

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Burst(clients, counts["answered"], counts["degraded"], counts["failed"],
                 time.perf_counter() - started)


def timed(client: httpx.Client, url: str, row: Row, text: str, *, last_on_connection: bool = False
          ) -> tuple[float, bool, dict[str, float] | None]:
    """(ms, degraded, where its time went) of one search: the answer's `took` and its
    trace's `timings`, where a sidecar answered. `last_on_connection`: the connection is
    closed after it, so the next search may reach another of the sidecar's workers."""
    started = time.perf_counter()
    response = client.post(f"{url}/{row.index}/_search",
                           json=search_body(text, row.tour, row.whole_source),
                           headers={"Connection": "close"} if last_on_connection else None)
    ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    answer = response.json()
    timings = answer.get("ext", {}).get("tour", {}).get("timings")
    parts = None if timings is None else {"took_ms": float(answer["took"]), **timings}
    return ms, degraded(answer), parts


# ---- a row's raw figures, and what the page says of them ---------------------------------

@dataclass
class RowRun:
    """A row's raw figures: every pass's totals, nothing divided yet."""

    row: Row
    latencies_ms: list[float] = field(default_factory=list)
    degraded: int = 0  # of the one-client searches
    # where each one-client search's time went, as its answer says (`timed`)
    time_parts: list[dict[str, float]] = field(default_factory=list)
    traffic: Traffic = field(default_factory=Traffic)
    # the counting pass's traffic while the sidecar's workers read ahead, searches included
    read_ahead: Traffic | None = None
    counted: int = 0  # searches in the counting pass
    bursts: list[Burst] = field(default_factory=list)
    engine_cpu_ms: float = 0.0  # over the bursts, idle not yet taken off
    engine_wall_s: float = 0.0  # how long those reads were apart
    sidecar_cpu_s: float | None = None


# an answer's time, as the sidecar tells it: its whole answer (`took`), the method's rounds
# (`ext.tour.timings.total_ms`) and, within them, the waits for the engine and the models
TIME_PARTS = ("took_ms", "total_ms", "engine_ms", "model_ms")


def per_search(run: RowRun, idle_ms_per_s: float) -> dict[str, Any]:
    """A row's figures per search: engine CPU less the engine's idle rate over the same
    wall time, sidecar CPU, engine calls and KB, latency quantiles and throughput."""
    answered = sum(b.answered for b in run.bursts)
    busy = run.engine_cpu_ms - idle_ms_per_s * run.engine_wall_s
    latency = np.asarray(run.latencies_ms)
    return {
        "label": run.row.label, "side": run.row.side, "index": run.row.index,
        "tour": None if run.row.tour is None else dict(run.row.tour),
        "engine_cpu_ms": round(busy / answered, 3) if answered else None,
        "sidecar_cpu_ms": None if run.sidecar_cpu_s is None or not answered
        else round(run.sidecar_cpu_s * 1000 / answered, 3),
        "engine_calls": round(run.traffic.requests / run.counted, 2) if run.counted else None,
        "kb_received": round(run.traffic.bytes_received / 1024 / run.counted, 1)
        if run.counted else None,
        "kb_sent": round(run.traffic.bytes_sent / 1024 / run.counted, 1) if run.counted else None,
        "calls": {call: round(n / run.counted, 2)
                  for call, n in run.traffic.calls.most_common()} if run.counted else {},
        "p50_ms": round(float(np.quantile(latency, 0.5)), 1) if latency.size else None,
        "p99_ms": round(float(np.quantile(latency, 0.99)), 1) if latency.size else None,
        "latency_searches": int(latency.size), "degraded": run.degraded,
        "p50_parts": {part: round(float(np.median([p[part] for p in run.time_parts])), 1)
                      for part in TIME_PARTS} if run.time_parts else None,
        "per_s": {str(b.clients): round(b.per_s, 2) for b in run.bursts},
        "read_ahead": None if run.read_ahead is None else {
            "engine_calls": run.read_ahead.requests,
            "mb_received": round(run.read_ahead.bytes_received / 2**20, 1)},
        "saturation": {"answered": answered, "degraded": sum(b.degraded for b in run.bursts),
                       "failed": sum(b.failed for b in run.bursts),
                       "engine_cpu_ms_raw": round(run.engine_cpu_ms),
                       "engine_wall_s": round(run.engine_wall_s, 1)},
    }


# ---- the passes ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """How many searches each pass sends."""

    warmup: int = 5
    latency: int = 60
    counted: int = 20
    seconds: float = 10.0


def count_pass(runs: Sequence[RowRun], sides: Mapping[str, Side], relay: CountingRelay,
               plan: Plan) -> None:
    """Each row's searches one at a time through sidecars whose upstream is the relay (the
    engine row through the relay itself), after a few uncounted ones."""
    with app_client() as client:
        for run in runs:
            side = sides[run.row.side]
            for text in side.texts.take(plan.warmup):
                timed(client, side.url, run.row, text)
            if side.cpu_s is not None:  # a sidecar
                relay.reset()
                read_ahead(client, side, run.row)
                run.read_ahead = relay.reset()
            time.sleep(WRITER_FLUSH_S)
            relay.reset()
            for text in side.texts.take(plan.counted):
                timed(client, side.url, run.row, text)
            time.sleep(WRITER_FLUSH_S)  # what the store queued for these searches is written
            run.traffic, run.counted = relay.reset(), plan.counted


def read_ahead(client: httpx.Client, side: Side, row: Row) -> None:
    """Uncounted searches, each on a connection of its own (so that they reach each
    worker), until the sidecar's workers have read their vector store and the caller's
    docs ahead (`store_docs_preloaded` and `doc_cache_read_ahead` still for 3 reads): a
    cost of a worker's start, and of a caller's first search once a `--doc-cache-ttl`, not
    a search's."""
    deadline, last, still = time.monotonic() + 300.0, -1.0, 0  # at most 5 minutes
    while still < 3 and time.monotonic() < deadline:
        timed(client, side.url, row, side.texts.take(1)[0], last_on_connection=True)
        stats = client.get(f"{side.url}/_tour/stats").json()["es_tour"]
        read = sum(float(stats.get(name, {}).get("total", 0.0))
                   for name in ("store_docs_preloaded", "doc_cache_read_ahead"))
        still, last = (still + 1 if read == last else 0), read
        time.sleep(1.0)


def latency_pass(runs: Sequence[RowRun], sides: Mapping[str, Side], plan: Plan) -> None:
    """Warm-up, then one search per row in turn, the starting row rotating, so a drift in
    the machine's load reaches every row alike."""
    with app_client() as client:
        for run in runs:
            side = sides[run.row.side]
            for text in side.texts.take(plan.warmup):
                timed(client, side.url, run.row, text)
            if side.cpu_s is not None:  # a sidecar
                read_ahead(client, side, run.row)
        for i in range(plan.latency):
            for run in [*runs[i % len(runs):], *runs[:i % len(runs)]]:
                side = sides[run.row.side]
                ms, worse, parts = timed(client, side.url, run.row, side.texts.take(1)[0])
                run.latencies_ms.append(ms)
                run.degraded += worse
                if parts is not None:
                    run.time_parts.append(parts)


def saturation_pass(runs: Sequence[RowRun], sides: Mapping[str, Side], clock: CpuClock,
                    pool: ProcessPoolExecutor, plan: Plan) -> None:
    """Each row in turn (in reverse at every other client count, so that a drift weighs on
    each alike): `plan.seconds` of saturation, CPU read around it, an idle window after."""
    for turn, clients in enumerate(CLIENTS):
        for run in runs if turn % 2 == 0 else runs[::-1]:
            side = sides[run.row.side]
            texts = side.texts.take(LABELER_CACHED_QUERIES)  # more than a pass answers
            cpu0, t0 = clock.idle()
            side0 = side.cpu_s() if side.cpu_s else 0.0
            burst = pool.submit(saturate, side.url, run.row, texts, clients,
                                plan.seconds).result()
            side1 = side.cpu_s() if side.cpu_s else 0.0
            cpu1, t1 = clock.read()
            side.texts.skip(burst.answered + burst.failed - len(texts))
            run.bursts.append(burst)
            run.engine_cpu_ms += cpu1 - cpu0
            run.engine_wall_s += t1 - t0
            if side.cpu_s:
                run.sidecar_cpu_s = (run.sidecar_cpu_s or 0.0) + side1 - side0


def merge(url: str, indices: Sequence[str]) -> dict[str, int]:
    """Force-merge each of `indices` to one segment, as a read-mostly index is kept (a bulk
    load leaves as many segments as the engine flushed, and every kNN leg searches each
    segment's graph apart); returns each index's segments before."""
    before = {}
    with httpx.Client(timeout=1800) as client:
        for index in indices:
            segments = client.get(f"{url}/{index}/_segments").json()["indices"][index]["shards"]
            before[index] = sum(len(copy["segments"]) for shard in segments.values()
                                for copy in shard)
            client.post(f"{url}/{index}/_forcemerge",
                        params={"max_num_segments": 1}).raise_for_status()
    return before


def settle(client: httpx.Client, url: str, timeout_s: float = 600.0) -> None:
    """Wait until the engine runs no merge (a fresh bulk load merges for minutes, which
    would count as every row's CPU), or `timeout_s`."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        nodes = client.get(f"{url}/_nodes/stats/indices/merge", params={
            "filter_path": "nodes.*.indices.merges.current"}).json()["nodes"].values()
        if not sum(n["indices"]["merges"]["current"] for n in nodes):
            return
        time.sleep(5)


# ---- the sidecars --------------------------------------------------------------------------

def start_sides(stack: ExitStack, names: set[str], engine: str, upstream: str,
                baseline: str | None, texts: Sequence[str], sized_docs: int = 0
                ) -> dict[str, Side]:
    """The engine, and a sidecar for each other name of `names` ("baseline": the baseline
    revision's; "sized": a doc cache holding `sized_docs`), upstream `upstream` (the
    engine, or the relay); their startups overlap.
    Each serves with `es-tour serve`'s default workers (one per core), as the baseline's
    `es-tour serve` does, and keeps no ranking for a later page: a saturation pass sends a
    text again within `--ranking-cache-ttl`, and every search here runs its rounds."""
    from es_tour.pipeline import DOC_CACHE_MIB
    from es_tour.server._config import ServerConfig
    from es_tour.server._workers import default_workers

    servers: dict[str, SidecarProcess | RevisionSidecar] = {
        name: RevisionSidecar(baseline, upstream, engine) if name == "baseline" and baseline
        else SidecarProcess(replace(ServerConfig(
            upstream=upstream, engine=engine, workers=default_workers(),
            doc_cache_mib=0 if name == "uncached" else DOC_CACHE_MIB,
            ranking_cache_ttl_s=0), **(sized_cache(sized_docs) if name == "sized" else {})),
            startup_timeout_s=300)
        for name in sorted(names - {"engine"})}
    errors: list[BaseException] = []
    started: list[SidecarProcess | RevisionSidecar] = []

    def start(server: SidecarProcess | RevisionSidecar) -> None:
        try:
            server.__enter__()
            started.append(server)
        except BaseException as error:  # raised below, in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=start, args=(server,)) for server in servers.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for server in started:
        stack.callback(server.__exit__)
    if errors:
        raise errors[0]
    sides = {"engine": Side(upstream, None, TextStream(texts))}
    for name, server in servers.items():
        sides[name] = Side(server.url, server.cpu_seconds if isinstance(server, SidecarProcess)
                           else _tree_cpu(server.pid), TextStream(texts))
    return sides


def _tree_cpu(pid: int) -> Callable[[], float]:
    return lambda: cpu_seconds(pid)


# ---- a run ---------------------------------------------------------------------------------

def measure(engine: str, url: str, texts: Sequence[str], plan: Plan, baseline: str | None,
            scaled: Mapping[str, Any] | None, whole_source: bool = False,
            scale_only: bool = False) -> dict[str, Any]:
    """Every row on one engine (and the grown corpus's, `scaled` as `grow` tells it; with
    `scale_only`, those alone): counted through the relay by sidecars of their own, then
    latency and saturation straight to the engine."""
    runs = [] if scale_only else [RowRun(row) for row in main_rows(baseline, whole_source)]
    grown = ([RowRun(row) for row in scale_rows(scaled["index"], whole_source)]
             if scaled else [])
    sized_docs = scaled["docs"] if scaled else 0
    names = {run.row.side for run in [*runs, *grown]}
    relay = CountingRelay(url)
    with relay as relay_url, ExitStack() as stack:
        sides = start_sides(stack, names, engine, relay_url, baseline, texts, sized_docs)
        count_pass([*runs, *grown], sides, relay, plan)
    with ExitStack() as stack, httpx.Client(timeout=60) as client, \
            ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        sides = start_sides(stack, names, engine, url, baseline, texts, sized_docs)
        settle(client, url)
        clock = CpuClock(client, url)
        pool.submit(time.sleep, 0).result()  # its process starts now, not in a pass
        for part in (runs, grown):
            if part:
                latency_pass(part, sides, plan)
                saturation_pass(part, sides, clock, pool, plan)
        version = client.get(f"{url}/_nodes/_local",
                             params={"filter_path": "nodes.*.version"}).json()
        stats = client.get(f"{sides['index'].url}/_tour/stats").json()["es_tour"]
        sized = (client.get(f"{sides['sized'].url}/_tour/stats").json()["es_tour"]
                 if "sized" in sides else None)
    idle = clock.idle_ms_per_s
    return {"engine": engine, "version": next(iter(version["nodes"].values()))["version"],
            **({"sized_cache": sized_cache(sized_docs),
                "sized_hit_rate": sized["doc_cache"]["hit_rate"],
                "sized_bytes": int(sized["doc_cache_bytes"]),
                "sized_docs_kept": int(sized["doc_cache_read_ahead"]["total"]
                                       + sized["doc_cache_misses"]["total"])}
               if sized else {}),
            "doc_cache_hit_rate": stats["doc_cache"]["hit_rate"],
            "docs_read_ahead": int(stats.get("doc_cache_read_ahead", {}).get("total", 0)),
            "idle_cpu_ms_per_s": round(idle, 2), "rows": [per_search(r, idle) for r in runs],
            "scale_rows": [per_search(r, idle) for r in grown]}


def query_texts(dataset: BeirDataset) -> list[str]:
    """The dataset's distinct test, then train query texts: what the sidecars draw from."""
    return list(dict.fromkeys([*[t for _, t in sorted(dataset.queries("test").items())],
                               *[t for _, t in sorted(dataset.queries("train").items())]]))


def prepared(engine: str, url: str, dataset: BeirDataset) -> list[str]:
    """`make bench-app`'s index on the engine, its labeler's vector store warm (seeded from
    the model cache's corpus vectors): the store indices."""
    from es_tour.bench.app import prepare, warm_store
    from es_tour.server import Models

    models = Models("retriever")
    prepare(engine, url, dataset, models)
    return warm_store(engine, url, models, seed=dataset).stores


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, choose_engines=True)
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="also the index's method through this git revision's sidecar")
    parser.add_argument("--scale", type=int, default=0,
                        help="also on scifact-app grown this many times (0: not)")
    parser.add_argument("--scale-engines", default="opensearch")
    parser.add_argument("--scale-only", action="store_true",
                        help="only the corpus growth's rows (docs/benchmarks/load-scale.md)")
    parser.add_argument("--latency", type=int, default=Plan.latency)
    parser.add_argument("--counted", type=int, default=Plan.counted)
    parser.add_argument("--seconds", type=float, default=Plan.seconds,
                        help="each saturation pass")
    parser.add_argument("--whole-source", action="store_true",
                        help="the application's search asks its hits' whole _source (the "
                             "engine's default) rather than none")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/load.md"))
    args = parser.parse_args(argv)
    dataset = BeirDataset(args.dataset)
    texts = query_texts(dataset)
    plan = Plan(latency=args.latency, counted=args.counted, seconds=args.seconds)
    urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    load_start = os.getloadavg()[0]
    engines = []
    for engine in args.engines.split(","):
        stores = prepared(engine, urls[engine], dataset)
        scale = None
        if args.scale > 1 and engine in args.scale_engines.split(","):
            scale = grow(urls[engine], INDEX, args.scale, stores[0])
        segments = merge(urls[engine], [INDEX, *([scale["index"]] if scale else [])])
        result = measure(engine, urls[engine], texts, plan, args.baseline, scale,
                         args.whole_source, args.scale_only)
        engines.append({**result, "scale": scale, "segments_before_merge": segments})
    from es_tour.recommended import FRONTIER_20
    from es_tour.server._workers import default_workers

    report = {"command": parsed_command("python -m es_tour.bench.load", args, parser),
              "date": now(), "machine": machine(), "baseline": args.baseline,
              "whole_source": args.whole_source, "scale_only": args.scale_only,
              "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
              "plan": {"warmup": plan.warmup, "latency": plan.latency,
                       "counted": plan.counted, "seconds": plan.seconds},
              "settings": FRONTIER_20, "workers": default_workers(), "engines": engines}
    write_report(args.output, markdown(report), report)


if __name__ == "__main__":
    main()
