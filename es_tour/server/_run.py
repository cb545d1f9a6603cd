"""Running the sidecar: in the foreground (the CLI), or in the background (tests,
benchmarks): on a thread, or several workers under a supervisor process."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

from es_tour.errors import ConfigError, EsTourError
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._process import drain_seconds, setup_access_log, uvicorn_config
from es_tour.server._workers import STARTUP_TIMEOUT_S, Workers, listening_socket, run_supervisor


def parse_listen(listen: str) -> tuple[str, int]:
    """"host:port" -> (host, port); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


def serve(config: ServerConfig, listen: str = "127.0.0.1:9201", log_level: str = "info",
          ready: Callable[[], None] | None = None) -> None:
    """Serve until interrupted (Ctrl-C returns, once the sidecar has shut down); `ready` is
    called once the sidecar listens, every worker of `config.workers` (processes on one
    socket, es_tour.server._workers) when more than one."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and ready is not None:
                ready()

    host, port = parse_listen(listen)
    if config.workers > 1:
        try:
            Workers(config, listening_socket(host, port), log_level, ready).run()
        except KeyboardInterrupt:  # every worker drained first
            pass
        return
    setup_access_log(config)
    try:
        Server(uvicorn_config(config, host, port, None, log_level)).run()
    except KeyboardInterrupt:
        # uvicorn shuts down gracefully on SIGINT, then raises it again: for a sidecar in the
        # foreground, Ctrl-C is how it ends, not a failure (make would report Error 130)
        pass


class BackgroundServer:
    """A sidecar on a free loopback port: one process's on a thread of this one, with its
    own event loop; `config.workers` processes' under a supervisor process of their own
    (each loads its own models, so `models` must be None then).

    with BackgroundServer(ServerConfig(upstream=url)) as sidecar: sidecar.url ...
    """

    def __init__(self, config: ServerConfig, models: Models | None = None,
                 host: str = "127.0.0.1", startup_timeout_s: float | None = None):
        if config.workers > 1 and models is not None:
            raise ConfigError("a sidecar of several workers loads models in each; "
                              "give no Models")
        self._sock = listening_socket(host, 0)
        scheme = "https" if config.tls_cert else "http"
        self.url = f"{scheme}://{host}:{self._sock.getsockname()[1]}"
        self._config, self._models, self._host = config, models, host
        self._timeout = startup_timeout_s or (
            STARTUP_TIMEOUT_S if config.workers > 1 else 60.0)
        self._drain_s = drain_seconds(config)
        self._started: Callable[[], bool] = lambda: False
        self._alive: Callable[[], bool] = lambda: False
        self._stop: Callable[[], None] = lambda: None

    def __enter__(self) -> BackgroundServer:
        if self._config.workers > 1:
            self._start_supervisor()
        else:
            self._start_thread()
        deadline = time.monotonic() + self._timeout
        while not self._started():
            if not self._alive() or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise EsTourError(f"the sidecar did not start within {self._timeout:.0f}s")
            time.sleep(0.05)
        return self

    def _start_thread(self) -> None:
        import uvicorn

        server = uvicorn.Server(
            uvicorn_config(self._config, self._host, 0, self._models, "warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [self._sock]},
                                  daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(timeout=self._drain_s + 5)  # requests in flight drain first

        self._started, self._alive, self._stop = lambda: server.started, thread.is_alive, stop

    def _start_supervisor(self) -> None:
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        supervisor = context.Process(target=run_supervisor, name="es-tour-supervisor",
                                     args=(self._config, self._sock, "warning", ready))
        supervisor.start()

        def stop() -> None:
            if supervisor.is_alive() and supervisor.pid is not None:
                os.kill(supervisor.pid, signal.SIGTERM)  # every worker drains first
            supervisor.join(timeout=self._drain_s + 10)
            if supervisor.is_alive():
                supervisor.kill()
                supervisor.join()

        self._started, self._alive, self._stop = ready.is_set, supervisor.is_alive, stop

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop()
        self._sock.close()
