"""Running the sidecar: in the foreground (the CLI), or on a thread (tests, benchmarks)."""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from es_tour.errors import ConfigError, EsTourError
from es_tour.server._app import create_app
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._ops import access_log
from es_tour.server._service import FALLBACK_TIMEOUT_MS

if TYPE_CHECKING:
    import uvicorn


def parse_listen(listen: str) -> tuple[str, int]:
    """"host:port" -> (host, port); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


def uvicorn_config(config: ServerConfig, host: str, port: int, models: Models | None,
                   log_level: str) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(create_app(config, models), host=host, port=port, log_level=log_level,
                          access_log=False, lifespan="on",
                          timeout_graceful_shutdown=drain_seconds(config),
                          ssl_certfile=config.tls_cert, ssl_keyfile=config.tls_key)


def setup_access_log(config: ServerConfig) -> None:
    """The access log's own handler, when switched on: uvicorn's logging setup covers its
    own loggers only."""
    if config.access_log and not access_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False


def drain_seconds(config: ServerConfig) -> int:
    """How long a shutdown waits for requests in flight: a refinement at the configured
    deadline, then its round-0 fallback. A request that asked for a longer timeout_ms is
    cut when this runs out."""
    return math.ceil((config.deadline_ms + FALLBACK_TIMEOUT_MS) / 1000)


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
        from es_tour.server._workers import Workers

        try:
            Workers(config, host, port, log_level, ready).run()
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
    """A sidecar on a free loopback port, on its own thread and event loop.

    with BackgroundServer(ServerConfig(upstream=url)) as sidecar: sidecar.url ...
    """

    def __init__(self, config: ServerConfig, models: Models | None = None,
                 host: str = "127.0.0.1", startup_timeout_s: float = 60.0):
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        scheme = "https" if config.tls_cert else "http"
        self.url = f"{scheme}://{host}:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(
            uvicorn_config(config, host, 0, models, "warning"))
        self._timeout = startup_timeout_s
        self._drain_s = drain_seconds(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise EsTourError(f"the sidecar did not start within {self._timeout:.0f}s")
            time.sleep(0.05)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=self._drain_s + 5)  # requests in flight drain first
        self._sock.close()
