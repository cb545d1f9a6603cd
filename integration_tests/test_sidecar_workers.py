"""`es-tour serve --workers 2` in front of a real engine: both workers answer refined
searches, `/_tour/stats` sums what each counted, health counts both, and Ctrl-C drains
them and leaves nothing behind (the processes, the metrics directory).

One engine, one sidecar start: every worker loads its own models, which on two shared
cores takes most of this module's time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from es_tour.cluster import NodeStatus
from es_tour.server._stats import MULTIPROC_ENV
from integration_tests.conftest import SMALL_REFINE, TOPIC_TEXTS, index_texts

REPO = Path(__file__).resolve().parents[1]
ENGINE = "opensearch"
INDEX = "it-sidecar-workers"
STARTUP_S = 240  # two workers' imports and models, on two busy cores
WORKERS = 2


class Sidecar:
    def __init__(self, process: subprocess.Popen[str], url: str):
        self.process, self.url = process, url

    def workers(self) -> list[int]:
        """The worker processes: the supervisor's spawned children (not multiprocessing's
        resource tracker)."""
        children = [int(child) for task in Path(f"/proc/{self.process.pid}/task").iterdir()
                    for child in (task / "children").read_text().split()]
        return [pid for pid in children
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def _metrics_dir(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for entry in environ:
        if entry.startswith(MULTIPROC_ENV.encode() + b"="):
            return entry.split(b"=", 1)[1].decode()
    return None


@pytest.fixture(scope="module")
async def sidecar(nodes: dict[str, NodeStatus], retriever: Any) -> AsyncIterator[Sidecar]:
    url = nodes[ENGINE].url
    await index_texts(ENGINE, url, INDEX, TOPIC_TEXTS, retriever)
    with socket_port() as port:
        pass  # a free port, released for the sidecar to bind
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    process = subprocess.Popen(
        [sys.executable, "-m", "es_tour", "serve", "--upstream", url, "--engine", ENGINE,
         "--listen", f"127.0.0.1:{port}", "--workers", str(WORKERS), "--log-level", "warning",
         "--deadline-ms", "120000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(STARTUP_S, process.kill)
    watchdog.start()
    try:
        ready = process.stdout.readline() if process.stdout else ""
    finally:
        watchdog.cancel()
    try:
        assert ready.startswith("es-tour sidecar on"), \
            process.stderr.read() if process.stderr else ""
        yield Sidecar(process, f"http://127.0.0.1:{port}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class socket_port:
    """A free loopback port (the socket is closed on exit)."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        return int(self._sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


def _refine(url: str, query: str) -> dict[str, Any]:
    # a connection of its own: each search may land on either worker
    with httpx.Client(timeout=120) as client:
        response = client.post(f"{url}/{INDEX}/_search", json={
            "query": {"match": {"text": query}}, "size": 3, "ext": {"tour": SMALL_REFINE}})
    assert response.status_code == 200, response.text
    return response.json()


def _refined_by(pid: int, directory: str) -> float:
    """The refined searches one worker counted, read from its own file alone."""
    with tempfile.TemporaryDirectory() as alone:
        os.symlink(Path(directory) / f"counter_{pid}.db", Path(alone) / f"counter_{pid}.db")
        registry = CollectorRegistry()
        MultiProcessCollector(registry, alone)  # type: ignore[no-untyped-call]
        return sum(s.value for family in registry.collect()
                   if family.name == "es_tour_refined" for s in family.samples)


def test_two_workers_answer_refined_searches_and_the_stats_sum_both(sidecar: Sidecar) -> None:
    workers = sidecar.workers()
    assert len(workers) == WORKERS
    directory = _metrics_dir(workers[0])
    assert directory is not None and Path(directory).is_dir()
    health = httpx.get(f"{sidecar.url}/_tour/health", timeout=30).json()
    assert health["workers"] == {"serving": WORKERS, "configured": WORKERS}

    sent = 0
    with ThreadPoolExecutor(4) as pool:
        while sent < 48:  # until each worker answered some (the kernel picks who accepts)
            texts = [TOPIC_TEXTS[i % len(TOPIC_TEXTS)] for i in range(sent, sent + 8)]
            answers = list(pool.map(lambda text: _refine(sidecar.url, text), texts))
            sent += len(answers)
            assert all(a["ext"]["tour"]["method"] == "rerank" for a in answers)
            if all(_refined_by(pid, directory) > 0 for pid in workers):
                break
    each = [_refined_by(pid, directory) for pid in workers]
    assert all(count > 0 for count in each), each
    stats = httpx.get(f"{sidecar.url}/_tour/stats", timeout=30).json()["es_tour"]
    assert stats["refined"]["by_method"]["rerank"] == sent == sum(each)
    assert stats["workers"] == WORKERS
    assert stats["pairs_labelled"]["total"] >= sent * 5


def test_ctrl_c_drains_every_worker_and_leaves_nothing_behind(sidecar: Sidecar) -> None:
    workers = sidecar.workers()
    directory = _metrics_dir(workers[0])
    assert directory is not None
    sidecar.process.send_signal(signal.SIGINT)
    _, err = sidecar.process.communicate(timeout=60)
    assert sidecar.process.returncode == 0, err
    assert err.strip().splitlines()[-1] == "sidecar stopped" and "Traceback" not in err
    deadline = time.monotonic() + 10
    while [pid for pid in workers if Path(f"/proc/{pid}").exists()]:
        assert time.monotonic() < deadline, "a worker outlived the sidecar"
        time.sleep(0.1)
    assert not Path(directory).exists()
