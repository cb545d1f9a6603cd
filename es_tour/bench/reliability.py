"""Reliability of the sidecar: load, an engine killed and restarted, an interrupted ingest,
a cluster node killed. Loopback only; every loop stops by itself (duration and count).

    python -m es_tour.bench.reliability --dataset ../shared/datasets/scifact --port-base 9600

Nodes (OpenSearch): the main one on the port base holds SciFact; base + 5 is killed and
restarted; base + 20 and base + 21 form a two-node cluster (transport ports base + 40, + 41;
the single nodes take the first free transport port from their HTTP port + 20000).
Writes docs/benchmarks/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench._sidecar import SidecarProcess, server_stack
from es_tour.bench.proxy import QUERIES
from es_tour.cluster import LocalCluster, LocalNode
from es_tour.datasets import BeirDataset
from es_tour.engines import IndexSpec, connect
from es_tour.server._config import ServerConfig

HEALTH = ("GET", "/_cluster/health", None)
# Every kind of request a load client sends, by its ext.tour: "health" and "search" (a plain
# match query) pass through; the others are answered by the sidecar.
KINDS: dict[str, dict[str, Any] | None] = {
    "health": None,
    "search": None,
    "bm25": {"method": "bm25", "k": 10},
    "knn": {"method": "knn", "k": 10},
    "tour": {"method": "tour-hard", "k": 10, "max_rounds": 1},
    "agent": {"method": "hre", "k": 10, "top_k": 100},
    "tour-k40": {"method": "tour-hard", "k": 40},  # the figure: health under this
}
PASSTHROUGH = ("health", "search")
REFINED = ("tour", "agent", "tour-k40")
ERROR_BACKOFF_S = 0.1
WARM_UP = 10
DEFAULT_MIX = {"health": 3, "search": 3, "bm25": 2, "knn": 2, "tour": 1, "agent": 1}
# Pass-through and the pipeline's own engine client (bm25, knn), no labeler: while model
# calls hold the sidecar's event loop, too few requests would meet a node's death.
ENGINE_ONLY_MIX = {"health": 1, "search": 1, "bm25": 1, "knn": 1}


@dataclass(frozen=True)
class Outcome:
    kind: str
    status: int  # 0: no HTTP answer (transport error or client timeout)
    ms: float
    sent_at: float  # time.monotonic() when sent
    degraded: bool = False
    error: str = ""  # the transport error's class when there was no answer


@dataclass
class LoadRun:
    """Outcomes of a load run, and the pass-through probe's latencies idle and under load."""

    outcomes: list[Outcome]
    seconds: float
    idle_ms: dict[str, list[float]] = field(default_factory=dict)
    loaded_ms: dict[str, list[float]] = field(default_factory=dict)

    def errors(self) -> Counter[str]:
        """Non-200 answers by kind and status."""
        return Counter(f"{o.kind} {o.status or o.error}" for o in self.outcomes
                       if o.status != 200)

    def refined_per_s(self) -> float:
        done = [o for o in self.outcomes if o.kind in REFINED and o.status == 200]
        return len(done) / self.seconds if self.seconds else 0.0

    def degraded_fraction(self) -> float:
        done = [o for o in self.outcomes if o.kind in REFINED and o.status == 200]
        return sum(o.degraded for o in done) / len(done) if done else 0.0


def request_for(kind: str, index: str, query: str) -> tuple[str, str, dict[str, Any] | None]:
    if kind == "health":
        return HEALTH
    body: dict[str, Any] = {"size": 10, "query": {"match": {"text": query}}}
    if KINDS[kind] is not None:
        body["ext"] = {"tour": dict(KINDS[kind] or {})}
    return "POST", f"/{index}/_search", body


async def send(client: httpx.AsyncClient, kind: str, index: str, query: str) -> Outcome:
    method, path, body = request_for(kind, index, query)
    sent_at = time.monotonic()
    try:
        response = await client.request(method, path, json=body)
    except httpx.TransportError as exc:
        return Outcome(kind, 0, (time.monotonic() - sent_at) * 1000, sent_at,
                       error=type(exc).__name__)
    ms = (time.monotonic() - sent_at) * 1000
    degraded = False
    if response.status_code == 200 and kind in REFINED:
        degraded = bool(response.json().get("ext", {}).get("tour", {}).get("degraded"))
    return Outcome(kind, response.status_code, ms, sent_at, degraded)


async def load(url: str, index: str, *, clients: int, seconds: float, max_requests: int,
               mix: Mapping[str, int] = DEFAULT_MIX, timeout_s: float = 60.0,
               stop: asyncio.Event | None = None, seed: int = 0) -> LoadRun:
    """`clients` concurrent clients sending requests of `mix` (weights by kind) until
    `seconds` pass, `max_requests` are sent or `stop` is set; each waits ERROR_BACKOFF_S
    after a failed request."""
    outcomes: list[Outcome] = []
    stop = stop or asyncio.Event()
    ends = time.monotonic() + seconds
    kinds, weights = list(mix), list(mix.values())
    limits = httpx.Limits(max_connections=clients)

    async def client(number: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(seed * 1000 + number)
        while time.monotonic() < ends and len(outcomes) < max_requests and not stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            outcome = await send(http, kind, index, rng.choice(QUERIES))
            outcomes.append(outcome)
            if outcome.status != 200:
                await asyncio.sleep(ERROR_BACKOFF_S)  # as a client would, not a tight loop

    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))
    return LoadRun(outcomes, time.monotonic() - started)


async def probe(url: str, index: str, *, until: Callable[[], bool], max_requests: int,
                direct: str | None = None, pause_s: float = 0.05) -> dict[str, list[float]]:
    """Pass-through latencies (health and a plain search, in turn) on one connection until
    `until()` holds or `max_requests` are sent; a failed request is not a latency. With
    `direct` (the engine's URL) each request is also sent straight to the engine, right
    after, on a connection of its own: `"<kind> direct"` tells the engine's share."""
    targets = {"": url, **({" direct": direct} if direct else {})}
    latencies: dict[str, list[float]] = {kind + suffix: [] for kind in PASSTHROUGH
                                         for suffix in targets}
    clients = {suffix: httpx.AsyncClient(base_url=target, timeout=60.0)
               for suffix, target in targets.items()}
    try:
        for number in range(max_requests):
            if until():
                break
            kind = PASSTHROUGH[number % len(PASSTHROUGH)]
            for suffix, http in clients.items():
                outcome = await send(http, kind, index, QUERIES[number % len(QUERIES)])
                if outcome.status == 200:
                    latencies[kind + suffix].append(outcome.ms)
            await asyncio.sleep(pause_s)
    finally:
        for http in clients.values():
            await http.aclose()
    return latencies


async def load_with_probe(url: str, index: str, *, clients: int, seconds: float,
                          max_requests: int, idle_requests: int = 100,
                          mix: Mapping[str, int] = DEFAULT_MIX,
                          direct: str | None = None) -> LoadRun:
    """Pass-through latency idle, then the load with the same probe running beside it.
    The first `WARM_UP` probes are not counted: they open connections and fill caches."""
    await probe(url, index, until=lambda: False, max_requests=WARM_UP, direct=direct)
    idle = await probe(url, index, until=lambda: False, max_requests=idle_requests,
                       direct=direct)
    running = asyncio.create_task(load(url, index, clients=clients, seconds=seconds,
                                       max_requests=max_requests, mix=mix))
    loaded = await probe(url, index, until=running.done, max_requests=100_000,
                         direct=direct)
    run = await running
    run.idle_ms, run.loaded_ms = idle, loaded
    return run


async def engine_kill(node: LocalNode, url: str, index: str, *, clients: int,
                      down_after_s: float, after_back_s: float, deadline_ms: int,
                      max_requests: int = 100_000) -> dict[str, Any]:
    """Load through the sidecar; SIGKILL the engine after `down_after_s`, start it again,
    keep the load `after_back_s` longer. Returns what was answered while it was down and
    how long after it was back the last failure was."""
    stop = asyncio.Event()
    mix = {"health": 1, "search": 1, "knn": 1, "tour": 1}
    running = asyncio.create_task(load(url, index, clients=clients, seconds=3600,
                                       max_requests=max_requests, mix=mix, stop=stop,
                                       timeout_s=deadline_ms / 1000 + 30))
    await asyncio.sleep(down_after_s)
    pid = node.pid()
    assert pid is not None, f"no engine runs on {node.url}"
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while node.pid() is not None and time.monotonic() < killed_at + 30:
        await asyncio.sleep(0.1)  # SIGKILL is not instant: start() would find it running
    # down: from the kill until start() says healthy, restart included (a starting node
    # may rightly answer 200 before that); a dead JVM's pid can vanish within 0.5 s, so the
    # time before the restart alone may hold no request at all
    await asyncio.to_thread(node.start, 600.0)
    back_at = time.monotonic()
    await asyncio.sleep(after_back_s)
    stop.set()
    run = await running
    down = [o for o in run.outcomes if killed_at + 0.5 < o.sent_at < back_at]
    after = [o for o in run.outcomes if o.sent_at >= back_at]
    last_failure = max((o.sent_at + o.ms / 1000 for o in after if o.status != 200),
                       default=back_at)
    return {
        "down_s": back_at - killed_at,
        "down_answers": Counter(o.status for o in down),
        "down_max_ms": max((o.ms for o in down), default=0.0),
        "recovery_s": last_failure - back_at,
        "answered_after": sum(o.status == 200 for o in after),
        "run": run,
    }


def interrupted_ingest(dataset: Path, url: str, index: str, *, engine: str = "opensearch",
                       timeout_s: float = 900.0) -> dict[str, Any]:
    """`es-tour index` into a fresh index, SIGKILLed once docs arrive, then run again to the
    end. Returns the docs seen at the kill, the final count and the ids lost or extra."""
    httpx.delete(f"{url}/{index}")
    command = [sys.executable, "-m", "es_tour", "index", "--dataset", str(dataset),
               "--engine", engine, "--url", url, "--index", index]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    at_kill, ends = 0, time.monotonic() + timeout_s
    while first.poll() is None and time.monotonic() < ends and at_kill == 0:
        time.sleep(0.5)
        at_kill = _count(url, index)
    first.kill()
    first.wait()
    if first.returncode == 0:
        raise RuntimeError("the first `es-tour index` finished before it could be interrupted")
    subprocess.run(command, check=True, timeout=timeout_s, stdout=subprocess.DEVNULL)
    expected = [doc.id for doc in BeirDataset(dataset).corpus()]
    stored = _ids(url, index)
    return {"docs": len(expected), "at_kill": at_kill, "count": _count(url, index),
            "lost": sorted(set(expected) - set(stored)),
            "extra": sorted(set(stored) - set(expected)),
            "duplicated": len(stored) - len(set(stored))}


async def node_kill(cluster: LocalCluster, url: str, index: str, *, clients: int,
                    seconds: float, kill_after_s: float, max_requests: int,
                    mix: Mapping[str, int] = ENGINE_ONLY_MIX) -> dict[str, Any]:
    """Load through a sidecar in front of every node; SIGKILL one node (not the elected
    cluster manager: a two-node cluster keeps one vote) after `kill_after_s`."""
    victim = next(node for node in cluster.nodes if not _is_manager(node.url))
    running = asyncio.create_task(load(url, index, clients=clients, seconds=seconds,
                                       max_requests=max_requests, mix=mix))
    await asyncio.sleep(kill_after_s)
    pid = victim.pid()
    assert pid is not None, f"no engine runs on {victim.url}"
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    run = await running
    return {"killed": victim.url, "after_kill": sum(o.sent_at > killed_at for o in run.outcomes),
            "run": run}


async def copy_docs(source: str, target: str | Sequence[str], index: str, docs: int,
                    target_index: str, engine: str = "opensearch") -> None:
    """The first `docs` docs of `index` (with their vectors) into `target_index`, replaced."""
    async with connect(engine, source) as adapter:
        hits = await adapter.bool_search(index, {"match_all": {}}, docs)
    async with connect(engine, target) as adapter:
        dimension = len(hits[0].source["embedding"])
        await adapter.create_index(IndexSpec(target_index, dimension), replace=True)
        await adapter.bulk_index(target_index, [{"_id": h.id, **h.source} for h in hits])
        await adapter.refresh(target_index)
    first = target if isinstance(target, str) else target[0]
    httpx.get(f"{first}/_cluster/health/{target_index}",
              params={"wait_for_status": "green", "timeout": "120s"}, timeout=130)


def _is_manager(url: str) -> bool:
    manager = httpx.get(f"{url}/_cluster/state/master_node", timeout=10).json()["master_node"]
    local = httpx.get(f"{url}/_nodes/_local", params={"filter_path": "nodes.*.name"},
                      timeout=10).json()["nodes"]
    return manager in local


def _count(url: str, index: str) -> int:
    response = httpx.get(f"{url}/{index}/_count", timeout=10)
    return int(response.json()["count"]) if response.status_code == 200 else 0


def _ids(url: str, index: str) -> list[str]:
    httpx.post(f"{url}/{index}/_refresh", timeout=60)
    response = httpx.post(f"{url}/{index}/_search", timeout=60, json={
        "size": 10_000, "_source": False, "query": {"match_all": {}}})
    response.raise_for_status()
    return [hit["_id"] for hit in response.json()["hits"]["hits"]]


def sidecar(upstreams: Sequence[str], **options: Any) -> AbstractContextManager[str]:
    return SidecarProcess(ServerConfig(upstream=",".join(upstreams), engine="opensearch",
                                       **options))


def quantiles(values: Sequence[float]) -> str:
    if not values:
        return "- | -"
    p50, p99 = np.quantile(np.asarray(values), [0.5, 0.99])
    return f"{p50:.1f} | {p99:.1f}"


@dataclass(frozen=True)
class Plan:
    """How big each part of the benchmark is; the integration tests run a smaller one."""

    clients: int = 50
    seconds: float = 60.0
    max_requests: int = 50_000
    tour_clients: int = 4
    tour_seconds: float = 60.0
    kill_clients: int = 8
    deadline_ms: int = 5_000
    cluster_clients: int = 16
    cluster_seconds: float = 40.0
    copied_docs: int = 500
    heap: str = "512m"


def run_all(dataset: Path, port_base: int, plan: Plan) -> dict[str, Any]:
    """Every part, on nodes from `port_base` (started if not running; those started here
    are stopped at the end)."""
    main = LocalNode("opensearch", port_base, plan.heap)
    victim = LocalNode("opensearch", port_base + 5, plan.heap)
    cluster = LocalCluster("opensearch", port_base + 20, 2, plan.heap,
                           transport_port=port_base + 40)
    started = [node for node in (main, victim) if node.pid() is None]
    results: dict[str, Any] = {}
    try:
        main.start(600)
        subprocess.run([sys.executable, "-m", "es_tour", "index", "--dataset", str(dataset),
                        "--url", main.url], check=True, stdout=subprocess.DEVNULL)
        index = BeirDataset(dataset).name
        with sidecar([main.url]) as url:
            results["load"] = asyncio.run(load_with_probe(
                url, index, clients=plan.clients, seconds=plan.seconds,
                max_requests=plan.max_requests, direct=main.url))
            results["health_under_tour"] = asyncio.run(load_with_probe(
                url, index, clients=plan.tour_clients, seconds=plan.tour_seconds,
                max_requests=plan.max_requests, mix={"tour-k40": 1}))
        results["ingest"] = interrupted_ingest(dataset, main.url, "reliability-ingest")
        victim.start(600)
        asyncio.run(copy_docs(main.url, victim.url, index, plan.copied_docs, "reliability"))
        with sidecar([victim.url], deadline_ms=plan.deadline_ms) as url:
            results["engine_kill"] = asyncio.run(engine_kill(
                victim, url, "reliability", clients=plan.kill_clients, down_after_s=5,
                after_back_s=10, deadline_ms=plan.deadline_ms))
        cluster.start(600)
        asyncio.run(copy_docs(main.url, cluster.urls, index, plan.copied_docs, "reliability"))
        with sidecar(cluster.urls) as url:
            results["node_kill"] = asyncio.run(node_kill(
                cluster, url, "reliability", clients=plan.cluster_clients,
                seconds=plan.cluster_seconds, kill_after_s=plan.cluster_seconds / 3,
                max_requests=plan.max_requests))
    finally:
        cluster.stop()
        for node in started:
            node.stop()
    return results


def markdown(results: Mapping[str, Any], plan: Plan, command: str) -> str:
    run, tour = results["load"], results["health_under_tour"]
    kill, ingest, cluster = results["engine_kill"], results["ingest"], results["node_kill"]
    lines = [
        "# Reliability",
        "",
        f"- command: `{command}`",
        f"- date: {now()}",
        f"- machine: {machine()}",
        f"- OpenSearch 2.19.1 nodes and the sidecar (its own process: {server_stack()}) on "
        "loopback; "
        "latencies in ms from the load clients' side.",
        "",
        f"## Load: {plan.clients} clients for {plan.seconds:.0f} s",
        "",
        "Mix (weights): " + ", ".join(f"{k} {v}" for k, v in DEFAULT_MIX.items())
        + ". `health` is `GET /_cluster/health`, `search` a plain match `_search` (both "
        "pass through); `bm25`, `knn`, `tour` (tour-hard k=10, one round) and `agent` (hre) "
        "carry `ext.tour`. A client waits 100 ms after a failed request. One more client "
        f"probes pass-through latency on its own connection (after {WARM_UP} uncounted "
        "warm-up requests), first idle, then beside the load; "
        "each probe request is repeated straight to the engine (`direct`), so the table "
        "separates the sidecar's share from the engine's and the machine's under the load.",
        "",
        "| kind | requests | 200 | p50 ms | p99 ms |",
        "|---|---|---|---|---|",
        *[f"| {kind} | {sum(o.kind == kind for o in run.outcomes)} | "
          f"{sum(o.kind == kind and o.status == 200 for o in run.outcomes)} | "
          + quantiles([o.ms for o in run.outcomes if o.kind == kind and o.status == 200])
          + " |" for kind in DEFAULT_MIX],
        "",
        f"Errors: {dict(run.errors()) or 'none'}. Refined searches (tour, agent) answered: "
        f"{run.refined_per_s():.2f}/s, degraded (deadline hit, round-0 ranking): "
        f"{run.degraded_fraction():.1%}.",
        "",
        "| pass-through probe | idle p50 ms | idle p99 ms | loaded p50 ms | loaded p99 ms | "
        "p99 loaded / idle | loaded p99 / direct's |",
        "|---|---|---|---|---|---|---|",
        *[f"| {kind} | {quantiles(run.idle_ms[kind])} | {quantiles(run.loaded_ms[kind])} | "
          f"{_ratio(run.loaded_ms[kind], run.idle_ms[kind])} | "
          f"{_ratio(run.loaded_ms[kind], run.loaded_ms.get(kind + ' direct', []))} |"
          for kind in run.idle_ms],
        "",
        f"## `GET /_cluster/health` while {plan.tour_clients} clients run `tour-hard` "
        "with `k: 40` on SciFact",
        "",
        "| | p50 ms | p99 ms | requests |",
        "|---|---|---|---|",
        f"| idle | {quantiles(tour.idle_ms['health'])} | {len(tour.idle_ms['health'])} |",
        f"| under TOUR load | {quantiles(tour.loaded_ms['health'])} | "
        f"{len(tour.loaded_ms['health'])} |",
        "",
        f"tour-hard k=40: {len(tour.outcomes)} searches in {tour.seconds:.0f} s, "
        f"errors {dict(tour.errors()) or 'none'}, degraded {tour.degraded_fraction():.1%}.",
        "",
        "## Engine killed mid-load",
        "",
        f"{plan.kill_clients} clients (health, search, knn, tour) through a sidecar with "
        f"`deadline_ms` {plan.deadline_ms}; the engine is SIGKILLed after 5 s and started "
        "again at once.",
        "",
        f"- down {kill['down_s']:.1f} s (restart included); answers sent while down: "
        f"{_statuses(kill['down_answers'])}; slowest of them {kill['down_max_ms']:.0f} ms.",
        f"- recovery: the last failed request sent after the engine was back ended "
        f"{kill['recovery_s']:.2f} s after; {kill['answered_after']} answered 200 after.",
        "",
        "## `es-tour index` interrupted, then run again",
        "",
        f"SIGKILLed with {ingest['at_kill']} docs visible; after the rerun the index holds "
        f"{ingest['count']} of {ingest['docs']} docs: {len(ingest['lost'])} lost, "
        f"{len(ingest['extra'])} extra, {ingest['duplicated']} duplicated ids.",
        "",
        "## Two-node cluster, one node killed",
        "",
        f"`es-tour engine start --nodes 2` (one replica), a sidecar with both nodes as "
        f"upstreams, {plan.cluster_clients} clients for {plan.cluster_seconds:.0f} s "
        f"({', '.join(ENGINE_ONLY_MIX)}); the node that is not the elected cluster manager "
        f"({cluster['killed']}) is SIGKILLed after {plan.cluster_seconds / 3:.0f} s.",
        "",
        f"- requests: {len(cluster['run'].outcomes)}, {cluster['after_kill']} of them sent "
        f"after the kill; failed: {sum(cluster['run'].errors().values())} "
        f"({dict(cluster['run'].errors()) or 'none'}).",
        "",
    ]
    return "\n".join(lines)


def _ratio(loaded: Sequence[float], idle: Sequence[float]) -> str:
    if not loaded or not idle:
        return "-"
    return f"{np.quantile(loaded, 0.99) / np.quantile(idle, 0.99):.2f}"


def _statuses(counts: Counter[int]) -> str:
    return ", ".join(f"{count} × {status or 'no answer'}" for status, count in
                     sorted(counts.items())) or "none"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--port-base", type=int, default=9600)
    parser.add_argument("--clients", type=int, default=Plan.clients)
    parser.add_argument("--seconds", type=float, default=Plan.seconds)
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/reliability.md"))
    args = parser.parse_args(argv)
    plan = Plan(clients=args.clients, seconds=args.seconds)
    results = run_all(args.dataset, args.port_base, plan)
    command = portable_command("python -m es_tour.bench.reliability", [
        "--dataset", str(args.dataset), "--port-base", str(args.port_base),
        "--clients", str(args.clients), "--seconds", f"{args.seconds:g}"])
    text = markdown(results, plan, command)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
