"""Pass-through latency while the sidecar refines: a load of refined searches from a process
of its own (its GIL must not slow the probe), and a probe that sends `GET /_cluster/health`
to the sidecar and straight to the engine in turn, each on a new connection (so, under
several workers, the kernel picks which worker accepts it, as for a new client)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import httpx
import numpy as np

PROBE_PATH = "/_cluster/health"
PROBE_GAP_S = 0.02  # between two probe pairs: the probe itself must not load the machine
SETTLE_S = 3.0  # the load runs this long before the probe starts


@dataclass(frozen=True)
class Phase:
    """One measurement: `clients` refined clients (0: idle) while the probe ran."""

    clients: int
    sidecar_ms: list[float]
    engine_ms: list[float]
    refined_per_s: float
    failed: int  # refined requests that did not answer 200 (or degraded)

    def quantile(self, side: str, q: float) -> float:
        values = self.sidecar_ms if side == "sidecar" else self.engine_ms
        return float(np.quantile(np.asarray(values), q)) if values else float("nan")


def refined_load(url: str, index: str, texts: Sequence[str], clients: int, stop: Event,
                 counting: Event, out: Queue[tuple[int, int, float]]) -> None:
    """`clients` threads sending refined searches (the index's own settings) until `stop`;
    puts (answered refined while `counting`, failed, counted seconds)."""
    done = failed = 0
    lock = threading.Lock()

    def client(first: int) -> None:
        nonlocal done, failed
        with httpx.Client(timeout=120) as http:
            i = first
            while not stop.is_set():
                body = {"query": {"match": {"text": texts[i % len(texts)]}}, "size": 10,
                        "_source": False}
                i += clients
                try:
                    response = http.post(f"{url}/{index}/_search", json=body)
                    ok = response.status_code == 200 and \
                        not response.json().get("ext", {}).get("tour", {}).get("degraded")
                except httpx.HTTPError:
                    ok = False
                if counting.is_set() and not stop.is_set():
                    with lock:
                        done += ok
                        failed += not ok

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    counting.wait()
    started = time.perf_counter()
    stop.wait()
    seconds = time.perf_counter() - started
    for thread in threads:
        thread.join()
    out.put((done, failed, seconds))


def phase(sidecar: str, engine: str, index: str, texts: Sequence[str], clients: int,
          seconds: float) -> Phase:
    """Probe both sides for `seconds` while `clients` refined clients run."""
    context = multiprocessing.get_context("spawn")
    stop, counting = context.Event(), context.Event()
    out: Queue[tuple[int, int, float]] = context.Queue()
    load = context.Process(target=refined_load, daemon=True,
                           args=(sidecar, index, list(texts), clients, stop, counting, out))
    if clients:
        load.start()
        time.sleep(SETTLE_S)
    counting.set()
    sidecar_ms: list[float] = []
    engine_ms: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        engine_ms.append(_probe(engine))
        sidecar_ms.append(_probe(sidecar))
        time.sleep(PROBE_GAP_S)
    done, failed, counted = 0, 0, seconds
    if clients:
        stop.set()
        done, failed, counted = out.get(timeout=180)
        load.join(timeout=30)
    return Phase(clients, sidecar_ms, engine_ms, round(done / counted, 2), failed)


def _probe(base: str) -> float:
    """Milliseconds of one GET on a new connection."""
    started = time.perf_counter()
    response = httpx.get(f"{base}{PROBE_PATH}", timeout=30)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return elapsed


def process_tree(pid: int) -> list[int]:
    """`pid` and every process under it (Linux)."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            out += process_tree(int(child))
    return out


def memory_mib(pid: int) -> dict[str, Any]:
    """Resident (RSS) and proportional (PSS: a shared page split between its sharers) MiB
    of one process, from /proc (Linux)."""
    fields: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss"):
                fields[name] = int(rest.split()[0]) / 1024
    except OSError:
        return {"rss": None, "pss": None}
    return {"rss": round(fields.get("Rss", 0.0)), "pss": round(fields.get("Pss", 0.0))}


def worker_memory(supervisor: int) -> list[dict[str, Any]]:
    """The memory of each process serving: the workers under a supervisor, or the one
    process itself; multiprocessing's resource tracker (a few MiB) left out."""
    tree = process_tree(supervisor)
    serving = [pid for pid in tree[1:] if "spawn_main" in _cmdline(pid)] or [supervisor]
    return [memory_mib(pid) for pid in serving]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of `pid` and the processes under it so far (Linux)."""
    total = 0.0
    for member in process_tree(pid):
        try:
            stat = Path(f"/proc/{member}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total
