"""Ctrl-C is how a sidecar in the foreground ends (`es-tour serve`, and the demo's last
step): exit status 0 and one line, so `make demo` reports no Error 130; with several
workers, every one of them drained and gone first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STARTUP_S = 180  # the labeler check and imports, on two busy cores


@pytest.mark.parametrize("workers", [1, 2])
def test_sigint_stops_the_sidecar_with_exit_status_0(workers: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # nothing listens on port 9: the sidecar starts without an engine
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "es_tour", "serve", "--upstream", "http://127.0.0.1:9",
         "--engine", "opensearch", "--listen", "127.0.0.1:0", "--log-level", "warning",
         "--workers", str(workers)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(STARTUP_S, sidecar.kill)  # a hung start fails, not blocks
    watchdog.start()
    try:
        try:
            ready = sidecar.stdout.readline() if sidecar.stdout else ""
        finally:
            watchdog.cancel()
        assert ready.startswith("es-tour sidecar on"), \
            sidecar.stderr.read() if sidecar.stderr else ""
        children = _children(sidecar.pid)
        assert len(children) >= (workers if workers > 1 else 0)  # + multiprocessing's tracker
        sidecar.send_signal(signal.SIGINT)
        _, err = sidecar.communicate(timeout=60)
    finally:
        if sidecar.poll() is None:  # a failed check leaves no sidecar behind
            sidecar.kill()
            sidecar.wait()
    assert sidecar.returncode == 0, err
    assert err.strip().splitlines()[-1] == "sidecar stopped"
    assert "Traceback" not in err
    deadline = time.monotonic() + 10  # the resource tracker ends when it sees us gone
    while [pid for pid in children if Path(f"/proc/{pid}").exists()]:
        assert time.monotonic() < deadline, "a worker outlived the sidecar"
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    """The processes `pid` started (Linux)."""
    tasks = Path(f"/proc/{pid}/task")
    return [int(child) for task in tasks.iterdir()
            for child in (task / "children").read_text().split()]
