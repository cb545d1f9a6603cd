"""Running the sidecar: in the foreground (the CLI), or on a thread (tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

from es_tour.errors import ConfigError, EsTourError
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._process import drain_seconds, setup_access_log, uvicorn_config
from es_tour.server._workers import Workers


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
