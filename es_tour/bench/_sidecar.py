"""The sidecar in a child process, as in production: in one process with the client that
measures it, the GIL would add tens of ms to every figure."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import httpx

from es_tour.errors import EsTourError
from es_tour.server._config import ServerConfig
from es_tour.server._run import serve

REPO = Path(__file__).resolve().parents[2]


def server_stack() -> str:
    """What uvicorn's "auto" picks here: uvloop and httptools when installed."""
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    http = "httptools" if find_spec("httptools") else "h11"
    return f"uvicorn, {loop} loop, {http} parser"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, alive: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        try:
            httpx.get(f"{url}/_cluster/health", timeout=5)
            return True
        except httpx.TransportError:
            time.sleep(0.2)
    return False


class SidecarProcess:
    """`serve` in a child process on a free loopback port; yields its URL."""

    def __init__(self, config: ServerConfig, startup_timeout_s: float = 120.0):
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._timeout = startup_timeout_s
        # a daemon may start no processes of its own: several workers need a plain one
        self._process = multiprocessing.get_context("spawn").Process(
            target=serve, args=(config, f"127.0.0.1:{port}", "warning"),
            daemon=config.workers == 1)

    def __enter__(self) -> str:
        self._process.start()
        if _wait_until_up(self.url, self._process.is_alive, self._timeout):
            return self.url
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


class RevisionSidecar:
    """The sidecar of another git revision of this repository, for a side-by-side baseline
    (`bench.proxy --baseline`): its tree checked out apart (a detached git worktree, removed
    after) and served by its own `es-tour serve`, with this environment's packages, on a
    free loopback port, with `workers` processes (None: the revision's default); yields
    its URL."""

    def __init__(self, revision: str, upstream: str, engine: str,
                 startup_timeout_s: float = 300.0, workers: int | None = None):
        self.revision = revision
        self.url = f"http://127.0.0.1:{_free_port()}"
        self._args = ["--upstream", upstream, "--engine", engine,
                      "--listen", self.url.removeprefix("http://"), "--log-level", "warning",
                      *(["--workers", str(workers)] if workers is not None else [])]
        self._timeout = startup_timeout_s
        self._scratch = Path(tempfile.mkdtemp(prefix="es-tour-baseline-"))
        self._tree = self._scratch / "tree"
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(self._tree),
                        self.revision], check=True, cwd=REPO)
        env = {**os.environ, "PYTHONPATH": str(self._tree)}
        self._process = subprocess.Popen([sys.executable, "-m", "es_tour", "serve", *self._args],
                                         cwd=self._tree, env=env)
        process = self._process
        if _wait_until_up(self.url, lambda: process.poll() is None, self._timeout):
            return self.url
        self.__exit__()
        raise EsTourError(f"the sidecar of {self.revision} did not start within "
                          f"{self._timeout:.0f}s")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        subprocess.run(["git", "worktree", "remove", "--force", str(self._tree)], cwd=REPO,
                       check=False)
        shutil.rmtree(self._scratch, ignore_errors=True)
