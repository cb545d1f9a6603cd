"""Ctrl-C is how a sidecar in the foreground ends (`es-tour serve`, and the demo's last
step): exit status 0 and one line, so `make demo` reports no Error 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STARTUP_S = 180  # the labeler check and imports, on two busy cores


def test_sigint_stops_the_sidecar_with_exit_status_0() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # nothing listens on port 9: the sidecar starts without an engine
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "es_tour", "serve", "--upstream", "http://127.0.0.1:9",
         "--engine", "opensearch", "--listen", "127.0.0.1:0", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(STARTUP_S, sidecar.kill)  # a hung start fails, not blocks
    watchdog.start()
    try:
        ready = sidecar.stdout.readline() if sidecar.stdout else ""
    finally:
        watchdog.cancel()
    assert ready.startswith("es-tour sidecar on"), sidecar.stderr.read() if sidecar.stderr else ""
    sidecar.send_signal(signal.SIGINT)
    _, err = sidecar.communicate(timeout=60)
    assert sidecar.returncode == 0, err
    assert err.strip().splitlines()[-1] == "sidecar stopped"
    assert "Traceback" not in err
