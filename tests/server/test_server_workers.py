"""`es-tour serve --workers`: how many by default, and the socket they share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from es_tour.server._workers import (
    METRICS_PREFIX,
    cgroup_cpus,
    default_workers,
    listening_socket,
    remove_stale_metrics,
)


@pytest.mark.parametrize(("cpu_max", "cpus"), [
    ("max 100000", None),  # no quota
    ("200000 100000", 2),
    ("150000 100000", 2),  # a part CPU rounds up
    ("50000 100000", 1),
    ("", None),
    ("garbage", None),
])
def test_a_cgroup_quota_reads_as_whole_cpus(cpu_max: str, cpus: int | None) -> None:
    assert cgroup_cpus(cpu_max) == cpus


def test_the_default_is_the_cores_unless_a_quota_allows_fewer(tmp_path: Path) -> None:
    cores = default_workers(tmp_path / "absent")
    assert cores >= 1
    quota = tmp_path / "cpu.max"
    quota.write_text("100000 100000\n")
    assert default_workers(quota) == 1
    quota.write_text(f"{(cores + 8) * 100000} 100000\n")
    assert default_workers(quota) == cores


def test_the_shared_socket_listens_on_the_port_asked_or_a_free_one() -> None:
    with listening_socket("127.0.0.1", 0) as sock:
        assert sock.getsockname()[1] > 0 and sock.get_inheritable()


def test_a_metrics_directory_whose_supervisor_is_gone_is_removed(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    stale = tmp_path / f"{METRICS_PREFIX}{finished.stdout.strip()}-abc"
    live = tmp_path / f"{METRICS_PREFIX}{os.getpid()}-def"
    other = tmp_path / "es-tour-metrics-notapid"
    for directory in (stale, live, other):
        directory.mkdir()
    assert remove_stale_metrics(tmp_path) == [stale]
    assert live.is_dir() and other.is_dir() and not stale.exists()


def test_a_background_sidecar_of_several_workers_takes_no_shared_models() -> None:
    from es_tour.errors import ConfigError
    from es_tour.server import BackgroundServer, Models, ServerConfig

    config = ServerConfig(upstream="http://127.0.0.1:9", workers=2)
    with pytest.raises(ConfigError, match="loads models in each"):
        BackgroundServer(config, Models())
