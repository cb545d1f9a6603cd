"""`es-tour serve --workers N`: N sidecar processes on one listening socket.

The supervisor binds the socket, then starts each worker as a fresh (spawned) process that
accepts on it with its own event loop, models, model pool and admission slots: nothing is
shared in memory, since the settings and the vector store live in the engine. The kernel
hands each new connection to a worker waiting in `accept`, so a busy worker takes fewer.
Their counters go to one directory of per-process files (prometheus_client's multiprocess
mode), made for the run and removed after it (or, when its supervisor was killed, by the
next run's start), which any worker's `/_tour/stats` and `/_tour/metrics` read whole; the
rankings they keep for later pages are one cache there (`_rankings`).

SIGINT or SIGTERM reaches the supervisor (and, from a terminal's Ctrl-C, the workers too):
each worker stops accepting and drains its requests in flight as a single process does,
then the supervisor exits as a single process would. A worker that dies is replaced.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.context import SpawnProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from types import FrameType

from es_tour.errors import EsTourError
from es_tour.server._config import ServerConfig
from es_tour.server._process import setup_access_log, uvicorn_config
from es_tour.server._stats import MULTIPROC_ENV
from es_tour.server._upstream import SettingsEpoch

log = logging.getLogger("es_tour.server")
STARTUP_FAILURE = 3  # a worker's exit status when it never served (as uvicorn's)
STARTUP_TIMEOUT_S = 300.0  # imports and models, on busy cores
BACKLOG = 2048  # uvicorn's default
CHECK_S = 0.5  # how often the supervisor looks for a worker that died
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# a run's metrics directory: METRICS_PREFIX + the supervisor's pid + a random part
METRICS_PREFIX = "es-tour-metrics-"


def default_workers(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The machine's cores: those this process may run on, fewer where a cgroup's CPU
    quota (a container's `--cpus`) allows less."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    quota = cgroup_cpus(cpu_max.read_text() if cpu_max.is_file() else "")
    return max(1, min(cores, quota) if quota is not None else cores)


def cgroup_cpus(cpu_max: str) -> int | None:
    """Whole CPUs a cgroup v2 `cpu.max` ("QUOTA PERIOD", or "max PERIOD") allows, rounded
    up; None without a quota."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None


def remove_stale_metrics(parent: Path) -> list[Path]:
    """Remove the metrics directories under `parent` whose supervisor is gone (killed
    before it could remove its own); returns them."""
    removed = []
    for directory in parent.glob(f"{METRICS_PREFIX}*-*"):
        pid = directory.name.removeprefix(METRICS_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket the workers inherit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


class Workers:
    """The supervisor: `run()` serves on `sock` (a `listening_socket`) until SIGINT or
    SIGTERM, with `config.workers` processes; `ready` is called once every one of them
    listens. It closes the socket as it ends."""

    def __init__(self, config: ServerConfig, sock: socket.socket, log_level: str,
                 ready: Callable[[], None] | None = None):
        self._config = config
        self._log_level = log_level
        self._ready = ready
        self._sock = sock
        self._context = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._signal: int | None = None
        self._processes: list[tuple[SpawnProcess, Event]] = []
        # the workers' one count of settings writes (`_upstream.SettingsEpoch`)
        self._settings_epoch = self._context.Value("Q", 0)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def run(self) -> None:
        remove_stale_metrics(Path(tempfile.gettempdir()))
        metrics = tempfile.mkdtemp(prefix=f"{METRICS_PREFIX}{os.getpid()}-")  # empty
        before = {sig: signal.signal(sig, self._on_signal)
                  for sig in (signal.SIGINT, signal.SIGTERM)}
        previous = os.environ.get(MULTIPROC_ENV)
        os.environ[MULTIPROC_ENV] = metrics  # the workers inherit it
        try:
            self._processes = [self._start() for _ in range(self._config.workers)]
            if self._all_started() and self._ready is not None:
                self._ready()
            while not self._stop.wait(CHECK_S):
                self._replace_dead()
        finally:
            self._stop_all()
            self._processes = []  # their events' semaphores released before any signal
            self._sock.close()
            shutil.rmtree(metrics, ignore_errors=True)
            if previous is None:
                os.environ.pop(MULTIPROC_ENV, None)
            else:
                os.environ[MULTIPROC_ENV] = previous
            for sig, handler in before.items():
                signal.signal(sig, handler)
        if self._signal == signal.SIGINT:
            raise KeyboardInterrupt  # as a single process ends on Ctrl-C
        if self._signal is not None:
            signal.raise_signal(self._signal)  # its own handler: SIGTERM's default ends us

    def _on_signal(self, sig: int, _: FrameType | None) -> None:
        self._signal = self._signal or sig
        self._stop.set()

    def _start(self) -> tuple[SpawnProcess, Event]:
        started = self._context.Event()
        process = self._context.Process(
            target=run_worker, name="es-tour-worker",
            args=(self._config, self._sock, self._log_level, started, os.getpid(),
                  self._settings_epoch))
        process.start()
        return process, started

    def _all_started(self) -> bool:
        """Whether every worker listens; False when a stop came first. A worker that ends
        before it serves (a model it cannot load, say) ends the run."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for process, started in self._processes:
            while not started.wait(0.1):
                if self._stop.is_set():
                    return False
                if not process.is_alive() or time.monotonic() > deadline:
                    self._stop.set()
                    raise EsTourError(f"a sidecar worker did not start (exit status "
                                      f"{process.exitcode}); its error is above")
        return True

    def _replace_dead(self) -> None:
        for i, (process, started) in enumerate(self._processes):
            if process.is_alive() or self._stop.is_set():
                continue
            _forget(process)
            if not started.is_set():  # it never served: the next would fail alike
                log.error("sidecar worker %s failed to start; stopping", process.pid)
                self._stop.set()
                return
            log.warning("sidecar worker %s ended (exit status %s); starting another",
                        process.pid, process.exitcode)
            self._processes[i] = self._start()

    def _stop_all(self) -> None:
        """SIGTERM to every worker: each drains as a single process does; then wait."""
        drain_s = math.ceil((self._config.deadline_ms + 1_000) / 1000) + 5
        for process, _ in self._processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + drain_s
        for process, _ in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.error("sidecar worker %s did not drain in %ss; killing it",
                          process.pid, drain_s)
                process.kill()
                process.join()
            _forget(process)


def _forget(process: SpawnProcess) -> None:
    """Its live gauges out of the sums (queue depth, docs queued, serving workers)."""
    from prometheus_client import multiprocess

    if process.pid is not None and os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(process.pid)  # type: ignore[no-untyped-call]


def run_supervisor(config: ServerConfig, sock: socket.socket, log_level: str,
                   ready: Event) -> None:
    """`Workers` as the main thread of a process of its own (its signal handlers need
    one), for a multi-worker `BackgroundServer`; SIGTERM ends it once they drained."""
    Workers(config, sock, log_level, ready.set).run()


def run_worker(config: ServerConfig, sock: socket.socket, log_level: str, started: Event,
               supervisor: int, settings_epoch: Synchronized[int]) -> None:
    """One worker: the sidecar on the inherited socket until SIGTERM (or SIGINT)."""
    import uvicorn


    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                started.set()

    threading.Thread(target=_orphan_watch, args=(supervisor,), daemon=True).start()
    setup_access_log(config)
    host, port = sock.getsockname()[:2]
    try:
        Server(uvicorn_config(config, host, port, None, log_level,
                              SettingsEpoch(settings_epoch))).run(sockets=[sock])
    except KeyboardInterrupt:  # a terminal's Ctrl-C reaches the workers too: drained
        pass
    if not started.is_set():
        sys.exit(STARTUP_FAILURE)


def _orphan_watch(supervisor: int) -> None:
    """A worker whose supervisor died (SIGKILL, OOM) drains and ends, as if told to."""
    while os.getppid() == supervisor:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
