"""ServerConfig: the sidecar's own options, checked once when built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from es_tour.errors import ConfigError

ENGINE_KINDS = ("opensearch", "elasticsearch")


@dataclass(frozen=True)
class ServerConfig:
    """How the sidecar reaches its upstream and what it does when a request says nothing.

    upstream: the engine's base URL (credentials in it are used for the pipeline's calls), or
    several nodes of one cluster, comma-separated: searches fail over between them.
    engine: "opensearch" or "elasticsearch"; None detects it from the upstream's headers.
    deadline_ms: the longest a refinement may run before round-0 results are returned.
    max_k: the largest `k` (and `from + size`) a request may ask for.
    settings_ttl_s: how long an index's `index.tour.*` settings are cached.
    method, labeler, encoder, vector_field, text_fields, options: the server defaults,
    used when neither the request's `ext.tour` nor the index settings say otherwise.
    """

    upstream: str
    engine: str | None = None
    deadline_ms: int = 10_000
    max_k: int = 1000
    settings_ttl_s: float = 5.0
    connect_timeout_s: float = 2.0
    upstream_timeout_s: float = 120.0
    max_connections: int = 100
    method: str = "tour-hard"
    labeler: str = "default"
    encoder: str = "retriever"
    vector_field: str = "embedding"
    text_fields: tuple[str, ...] = ("title", "text")
    options: Mapping[str, Any] = field(default_factory=lambda: {"k": 10})
    preload: bool = True  # load the encoder and default labeler at startup, not on first use

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ConfigError("upstream must name at least one http(s) URL")
        for url in self.upstreams:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"upstream must be http(s) URLs, got {url!r}")
        if self.engine is not None and self.engine not in ENGINE_KINDS:
            raise ConfigError(f"engine must be one of {list(ENGINE_KINDS)} or None, "
                              f"got {self.engine!r}")
        for name in ("deadline_ms", "max_k", "max_connections"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("settings_ttl_s", "connect_timeout_s", "upstream_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a number >= 0, got {value!r}")
        if not self.text_fields:
            raise ConfigError("text_fields must name at least one field")
        from es_tour.server._options import check_method

        check_method(self.method)

    @property
    def upstreams(self) -> tuple[str, ...]:
        """The nodes' base URLs, in the order given."""
        return tuple(url.strip().rstrip("/") for url in self.upstream.split(",") if url.strip())

    @property
    def base_url(self) -> str:
        return self.upstreams[0]
