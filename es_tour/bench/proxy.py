"""The sidecar's cost: pass-through `_search` latency through it vs direct, and TOUR's own time.

    python -m es_tour.bench.proxy --upstream http://127.0.0.1:9200 --index scifact

The sidecar runs in its own process (as in production: in one process with the client,
the GIL adds tens of ms); requests to both sides are interleaved so load drifts hit both
alike, and their count is bounded. TOUR's per-round overhead is its traces' `own_ms`: time
outside the engine and the models. Writes docs/benchmarks/proxy.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._machine import machine, now
from es_tour.bench._sidecar import SidecarProcess, server_stack
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
    with sidecar as sidecar_url, httpx.Client(timeout=60) as client:
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
                    "aggs": {"all": {"filter": {"match_all": {}}}}}  # always passes through
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:9200")
    parser.add_argument("--index", default="scifact")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--tour-searches", type=int, default=5)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/proxy.md"))
    args = parser.parse_args(argv)
    report = measure(args.upstream, args.index, args.requests, args.tour_searches)
    command = (f"python -m es_tour.bench.proxy --upstream {args.upstream} --index {args.index} "
               f"--requests {args.requests} --tour-searches {args.tour_searches}")
    text = markdown(report, command)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
