"""Checks the commands make of their inputs before any work: a bad one costs no ingest."""

from __future__ import annotations

from pathlib import Path

from es_tour.cluster import DEFAULT_PORTS
from es_tour.errors import ConfigError


def engine_url(engine: str, url: str | None) -> str:
    """`url`, or the local node's of `engine`; a ConfigError for an unknown engine or a URL
    that is not http(s)."""
    if engine not in DEFAULT_PORTS:
        raise ConfigError(f"--engine must be one of {list(DEFAULT_PORTS)}, got {engine!r}")
    address = url or f"http://127.0.0.1:{DEFAULT_PORTS[engine]}"
    if not address.startswith(("http://", "https://")):
        raise ConfigError(f"--url must be an http:// or https:// URL, got {address!r}")
    return address


def writable(path: Path | None) -> None:
    """A ConfigError now, before the work, for an output path that cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: {path.parent} is not a directory")
