"""`es-tour engine` as a user runs it: real processes, real exit codes."""

from __future__ import annotations

import socket
import subprocess
import sys

from integration_tests.conftest import TEST_PORTS


def es_tour(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "es_tour", *args], capture_output=True, text=True, timeout=300
    )


def test_unknown_engine_is_a_clear_error():
    result = es_tour("engine", "start", "--engine", "solr")
    assert result.returncode != 0
    assert "unknown engine [solr]" in result.stderr
    assert "Traceback" not in result.stderr


def test_port_in_use_is_a_clear_error():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = es_tour("engine", "start", "--engine", "opensearch", "--port", str(port))
    assert result.returncode != 0
    assert f"port {port} is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_shows_both_engines_versions(nodes):
    for engine, port in TEST_PORTS.items():
        result = es_tour("engine", "status", "--engine", engine, "--port", str(port))
        assert result.returncode == 0
        assert nodes[engine].version in result.stdout


def test_start_is_idempotent(nodes):
    result = es_tour(
        "engine", "start", "--engine", "opensearch", "--port", str(TEST_PORTS["opensearch"])
    )
    assert result.returncode == 0
    assert "2.19.1" in result.stdout
