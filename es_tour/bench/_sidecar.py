"""The sidecar in a child process, as in production: in one process with the client that
measures it, the GIL would add tens of ms to every figure."""

from __future__ import annotations

import multiprocessing
import socket
import time
from importlib.util import find_spec

import httpx

from es_tour.errors import EsTourError
from es_tour.server._config import ServerConfig
from es_tour.server._run import serve


def server_stack() -> str:
    """What uvicorn's "auto" picks here: uvloop and httptools when installed."""
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    http = "httptools" if find_spec("httptools") else "h11"
    return f"uvicorn, {loop} loop, {http} parser"


class SidecarProcess:
    """`serve` in a child process on a free loopback port; yields its URL."""

    def __init__(self, config: ServerConfig, startup_timeout_s: float = 120.0):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._timeout = startup_timeout_s
        # a daemon may start no processes of its own: several workers need a plain one
        self._process = multiprocessing.get_context("spawn").Process(
            target=serve, args=(config, f"127.0.0.1:{port}", "warning"),
            daemon=config.workers == 1)

    def __enter__(self) -> str:
        self._process.start()
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline and self._process.is_alive():
            try:
                httpx.get(f"{self.url}/_cluster/health", timeout=5)
                return self.url
            except httpx.TransportError:
                time.sleep(0.2)
        self.__exit__()
        raise EsTourError(f"the sidecar did not start within {self._timeout:.0f}s")

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the sidecar's processes (its workers too) have used so
        far (Linux): unlike wall time, other processes on the machine barely change it."""
        from es_tour.bench._load import cpu_seconds

        return cpu_seconds(self.pid)

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()  # SIGTERM: every worker drains, then the supervisor ends
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
