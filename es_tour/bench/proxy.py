"""The sidecar's cost: pass-through `_search` latency through it vs direct, and TOUR's own
time; then pass-through latency while the sidecar refines, at several worker counts.

    python -m es_tour.bench.proxy --upstream http://127.0.0.1:9200 --index scifact \
        --dataset ../shared/datasets/scifact --workers 1,2,4 --clients 0,4,16 --repeats 3

The sidecar runs in its own process (as in production: in one process with the client,
the GIL adds tens of ms); requests to both sides are interleaved so load drifts hit both
alike, and their count is bounded. TOUR's per-round overhead is its traces' `own_ms`: time
outside the engine and the models.

Under load (with `--dataset`): `make bench-app`'s `scifact-app` index with the budget
frontier's 20-pair settings and its labeler vector store warmed (both done here when
missing; warming SciFact from nothing takes long, see docs/benchmarks/cost.md). For each
worker count, a sidecar with that many workers, and with `--baseline REV` one process of
that git revision's sidecar, all up at once; in each repeat, for each sidecar in turn and
each client count, a process of its own sends refined searches (SciFact's query texts)
from that many clients,
while `GET /_cluster/health` goes to the sidecar and straight to the engine in turn
(es_tour/bench/_load.py). Writes docs/benchmarks/proxy.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._commands import portable_path
from es_tour.bench._load import Phase, phase, worker_memory
from es_tour.bench._machine import machine, now
from es_tour.bench._sidecar import RevisionSidecar, SidecarProcess, server_stack
from es_tour.server._config import ServerConfig

QUERIES = ("vitamin D deficiency", "stem cell differentiation", "antibiotic resistance genes",
           "tumour suppressor mutation", "insulin sensitivity in obesity")


@dataclass(frozen=True)
class Report:
    direct_ms: list[float]
    proxied_ms: list[float]
    own_ms_per_round: list[float]
    tour_searches: int
    sidecar_cpu_ms: float  # the sidecar process's CPU time per pass-through request

    @staticmethod
    def quantile(values: list[float], q: float) -> float:
        return float(np.quantile(np.asarray(values), q))


def measure(upstream: str, index: str, requests: int = 300, tour_searches: int = 5,
            field: str = "text") -> Report:
    """`requests` pass-through searches each way, then `tour_searches` TOUR searches."""
    direct_ms: list[float] = []
    proxied_ms: list[float] = []
    own: list[float] = []
    config = ServerConfig(upstream=upstream, deadline_ms=120_000)
    sidecar = SidecarProcess(config)
    with tour_off(upstream, index), sidecar as sidecar_url, httpx.Client(timeout=60) as client:
        def timed(base: str, body: dict[str, Any]) -> float:
            started = time.perf_counter()
            response = client.post(f"{base}/{index}/_search", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            return elapsed

        cpu_before = 0.0
        for i in range(requests + 10):  # the first 10 warm both paths up
            if i == 10:
                cpu_before = sidecar.cpu_seconds()
            body = {"size": 10, "query": {"match": {field: QUERIES[i % len(QUERIES)]}},
                    "aggs": {"all": {"filter": {"match_all": {}}}}}
            pair = (timed(upstream, body), timed(sidecar_url, body))
            if i >= 10:
                direct_ms.append(pair[0])
                proxied_ms.append(pair[1])
        cpu_ms = (sidecar.cpu_seconds() - cpu_before) * 1000 / requests
        for i in range(tour_searches):
            body = {"size": 10, "query": {"match": {field: QUERIES[i % len(QUERIES)]}},
                    "ext": {"tour": {"method": "tour-hard", "k": 10, "max_rounds": 2}}}
            response = client.post(f"{sidecar_url}/{index}/_search", json=body)
            response.raise_for_status()
            own += [r["own_ms"] for r in response.json()["ext"]["tour"]["rounds"]]
    return Report(direct_ms, proxied_ms, own, tour_searches, cpu_ms)


@contextmanager
def tour_off(upstream: str, index: str) -> Iterator[None]:
    """`index` with TOUR off, so that its searches pass through (an `es-tour tune --apply`
    may have enabled it): set off for the measurement, and on again after."""
    url = f"{upstream}/{index}/_settings"
    answer = httpx.get(f"{url}/index.tour.enabled", params={"flat_settings": "true"})
    answer.raise_for_status()
    # keyed by the concrete index, where `index` is an alias
    enabled = any(each["settings"].get("index.tour.enabled") == "true"
                  for each in answer.json().values())
    if enabled:
        print(f"TOUR is enabled on [{index}]: off while pass-through is measured")
        httpx.put(url, json={"index.tour.enabled": False}).raise_for_status()
    try:
        yield
    finally:
        if enabled:
            httpx.put(url, json={"index.tour.enabled": True}).raise_for_status()


def markdown(report: Report, command: str) -> str:
    q = Report.quantile
    d50, d99 = q(report.direct_ms, 0.5), q(report.direct_ms, 0.99)
    p50, p99 = q(report.proxied_ms, 0.5), q(report.proxied_ms, 0.99)
    own = report.own_ms_per_round
    return "\n".join([
        "# Sidecar overhead",
        "",
        f"- command: `{command}`",
        f"- date: {now()}",
        f"- machine: {machine()}",
        f"- {len(report.direct_ms)} `_search` requests each way on loopback, interleaved, "
        "one keep-alive connection each, after 10 warm-up pairs; the sidecar in its own "
        f"process ({server_stack()})",
        "",
        "| path | p50 ms | p99 ms |",
        "|---|---|---|",
        f"| direct | {d50:.2f} | {d99:.2f} |",
        f"| through the sidecar | {p50:.2f} | {p99:.2f} |",
        f"| overhead | {p50 - d50:+.2f} | {p99 - d99:+.2f} |",
        "",
        f"Median of the paired differences (sidecar − direct, request by request): "
        f"{statistics.median(np.subtract(report.proxied_ms, report.direct_ms)):+.2f} ms. "
        f"The sidecar process used {report.sidecar_cpu_ms:.2f} ms of CPU per pass-through "
        "request: its own work, which other load on the machine barely changes.",
        "",
        f"TOUR's own time per round (outside engine and model calls), from the traces of "
        f"{report.tour_searches} `tour-hard` searches (k=10, max_rounds=2): "
        f"mean {statistics.fmean(own):.2f} ms, max {max(own):.2f} ms over {len(own)} rounds.",
        "",
    ])


@dataclass(frozen=True)
class WorkerRun:
    workers: int
    phases: list[list[Phase]]  # per repeat, one per client count
    memory: list[dict[str, Any]]  # per worker process, models loaded, after the load
    revision: str | None = None  # the baseline's git revision; None: this tree

    @property
    def label(self) -> str:
        return f"{self.workers} at {self.revision}" if self.revision else str(self.workers)


def measure_load(upstream: str, engine: str, dataset: Path, worker_counts: list[int],
                 clients: list[int], repeats: int, seconds: float,
                 baseline: str | None = None) -> list[WorkerRun]:
    """Pass-through p50/p99 to the sidecar and to the engine, and refined searches/s,
    under each client count, `repeats` times, at each worker count; then, with `baseline`,
    the same for that git revision's sidecar (one process)."""
    from es_tour.bench.app import INDEX, prepare, warm_store
    from es_tour.datasets import BeirDataset
    from es_tour.server import Models

    data = BeirDataset(dataset)
    models = Models("retriever")
    prepare(engine, upstream, data, models)
    warm_store(engine, upstream, models)
    del models
    texts = sorted(set(data.queries().values()))
    sidecars: list[tuple[int, str | None, SidecarProcess | RevisionSidecar]] = [
        (workers, None, SidecarProcess(ServerConfig(upstream=upstream, engine=engine,
                                                    workers=workers), startup_timeout_s=300))
        for workers in worker_counts]
    if baseline is not None:
        sidecars.append((1, baseline, RevisionSidecar(baseline, upstream, engine, workers=1)))
    with ExitStack() as running:  # all up at once, so each repeat loads each in turn
        urls = [running.enter_context(sidecar) for _, _, sidecar in sidecars]
        for (workers, _, _), url in zip(sidecars, urls, strict=True):
            for text in texts[:4 * workers]:  # each worker's first searches load what they use
                httpx.post(f"{url}/{INDEX}/_search", json={"query": {"match": {"text": text}}},
                           timeout=120)
        phases: list[list[list[Phase]]] = [[] for _ in sidecars]
        for _ in range(repeats):
            for mine, url in zip(phases, urls, strict=True):
                mine.append([phase(url, upstream, INDEX, texts, n, seconds) for n in clients])
        return [WorkerRun(workers, mine, worker_memory(sidecar.pid), revision)
                for (workers, revision, sidecar), mine in zip(sidecars, phases, strict=True)]


def load_markdown(runs: list[WorkerRun], seconds: float) -> str:
    lines = [
        "## Pass-through under refined load",
        "",
        f"`GET /_cluster/health` to the sidecar and straight to the engine in turn, each on a "
        f"new connection, for {seconds:.0f} s per row, while a process of its own sends "
        "refined searches from N clients (the index's recommended settings, warm store). "
        "Every sidecar is up throughout and each repeat loads them in turn, so a drift in "
        "the machine's own load reaches them alike; ratio = sidecar / engine.",
        "",
        "| workers | repeat | refined clients | p50 ms sidecar / engine | ratio | "
        "p99 ms sidecar / engine | ratio | refined/s | failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for repeat, phases in enumerate(run.phases, 1):
            for p in phases:
                s50, e50 = p.quantile("sidecar", 0.5), p.quantile("engine", 0.5)
                s99, e99 = p.quantile("sidecar", 0.99), p.quantile("engine", 0.99)
                lines.append(f"| {run.label} | {repeat} | {p.clients} | {s50:.1f} / {e50:.1f} "
                             f"| {s50 / e50:.2f} | {s99:.1f} / {e99:.1f} | {s99 / e99:.2f} | "
                             f"{p.refined_per_s if p.clients else ''} | "
                             f"{p.failed if p.clients else ''} |")
    lines += ["", "Spread over the repeats (min – max):", "",
              "| workers | refined clients | p50 ratio | p99 ratio | refined/s |",
              "|---|---|---|---|---|"]
    for run in runs:
        for i, first in enumerate(run.phases[0]):
            same = [phases[i] for phases in run.phases]
            r50 = [p.quantile("sidecar", 0.5) / p.quantile("engine", 0.5) for p in same]
            r99 = [p.quantile("sidecar", 0.99) / p.quantile("engine", 0.99) for p in same]
            rate = [p.refined_per_s for p in same]
            lines.append(f"| {run.label} | {first.clients} | {min(r50):.2f} – {max(r50):.2f} "
                         f"| {min(r99):.2f} – {max(r99):.2f} | "
                         + (f"{min(rate):.2f} – {max(rate):.2f} |" if first.clients else " |"))
    lines.append("")
    for run in runs:
        memory = run.memory
        rss = sum(m["rss"] or 0 for m in memory)
        pss = sum(m["pss"] or 0 for m in memory)
        lines.append(f"- {run.label} worker(s): memory after the load, models loaded: "
                     f"RSS {rss} MiB in all "
                     f"({', '.join(str(m['rss']) for m in memory)} per process), "
                     f"PSS {pss} MiB")
    return "\n".join([*lines, *throughput_lines(runs), ""])


def throughput_lines(runs: list[WorkerRun]) -> list[str]:
    """Refined searches/s at the most clients, median over the repeats, against the
    baseline revision's where one ran (the same load, in the same run)."""
    most = max(p.clients for run in runs for p in run.phases[0])
    if not most:
        return []
    rates = {run.label: statistics.median(p.refined_per_s for phases in run.phases
                                          for p in phases if p.clients == most)
             for run in runs}
    baseline = next((run.label for run in runs if run.revision), None)
    lines = ["", f"Refined throughput under {most} clients, median of the repeats:", ""]
    for label, rate in rates.items():
        versus = f" ({rate / rates[baseline]:.2f}× the baseline)" \
            if baseline and label != baseline else ""
        lines.append(f"- {label} worker(s): {rate:.2f}/s{versus}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:9200")
    parser.add_argument("--index", default="scifact")
    parser.add_argument("--requests", type=int, default=300,
                        help="pass-through _search pairs on --index (an index es-tour does "
                             "not refine); 0 skips them")
    parser.add_argument("--tour-searches", type=int, default=5)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/proxy.md"))
    parser.add_argument("--dataset", type=Path, default=None,
                        help="SciFact (BEIR): also measure pass-through under refined load")
    parser.add_argument("--engine", default="opensearch")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--clients", default="0,4,16",
                        help="refined clients per row, comma-separated (0: idle)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="probe time per row")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="also load the sidecar of this git revision, side by side: "
                             "what a change did to refined throughput (served as one "
                             "process)")
    args = parser.parse_args(argv)
    command = (f"python -m es_tour.bench.proxy --upstream {args.upstream} --index {args.index} "
               f"--requests {args.requests} --tour-searches {args.tour_searches}")
    if args.dataset is not None:
        command += (f" --dataset {portable_path(args.dataset)} --engine {args.engine}"
                    f" --workers {args.workers}"
                    f" --clients {args.clients} --repeats {args.repeats}"
                    f" --seconds {args.seconds:g}"
                    + (f" --baseline {args.baseline}" if args.baseline else ""))
    # --requests 0: the load part alone
    text = markdown(measure(args.upstream, args.index, args.requests, args.tour_searches),
                    command) if args.requests else f"# Sidecar overhead\n\n- command: `{command}`\n"
    if args.dataset is not None:
        runs = measure_load(args.upstream, args.engine, args.dataset,
                            [int(n) for n in args.workers.split(",")],
                            [int(n) for n in args.clients.split(",")], args.repeats,
                            args.seconds, args.baseline)
        text += "\n" + load_markdown(runs, args.seconds)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
