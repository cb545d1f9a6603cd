"""`es-tour serve --workers`: how many by default, and the socket they share."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_tour.server._workers import cgroup_cpus, default_workers, listening_socket


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
