"""ServerConfig: the sidecar's own options, checked once when built."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from es_tour.errors import ConfigError
from es_tour.pipeline import DOC_CACHE_MIB, DOC_CACHE_TTL_S, DOC_PRELOAD_DOCS, PRELOAD_DOCS
from es_tour.server._options import DEFAULT_WINDOW, check_method
from es_tour.tls import UpstreamTls

ENGINE_KINDS = ("opensearch", "elasticsearch")
WHEN_FULL = ("queue", "reject")

# seconds a worker keeps a refinement's ranking for its caller's later pages (_rankings)
RANKING_TTL_S = 60.0


@dataclass(frozen=True)
class ServerConfig:
    """How the sidecar reaches its upstream and what it does when a request says nothing.

    upstream: the engine's base URL, or several nodes of one cluster, comma-separated
        (searches fail over between them); without credentials: every request reaches
        the engine with its caller's own.
    engine: "opensearch" or "elasticsearch"; None detects it from the upstream's headers.
    deadline_ms: the longest a refinement may run before round-0 results are returned;
      it covers the wait for capacity and model time (checked between labeler batches).
    max_k, max_size, max_rounds, max_top_k, max_timeout_ms: caps on what a request (or an
      index's settings) may ask for: `k`, the refined `window`, `max_rounds`, the agents'
      `top_k`, `ext.tour.timeout_ms`. Past a cap is a 400 naming it. Pages themselves go
      as deep as the engine's own `index.max_result_window`.
    max_body_bytes: the largest `_search` body the sidecar reads (413 past it).
    model_threads: threads that run labeler batches (query embeddings get one more).
    label_batch: docs per labeler batch; a cancelled refinement stops after the current one.
    max_refinements: TOUR requests refining at once in each worker process; the others
      wait or are refused.
    workers: processes serving on one listening socket (`es-tour serve --workers`), each
      with its own event loop, models, model pool and admission slots; their counters are
      summed (docs/sidecar.md#workers-using-every-core).
    when_full: "queue" (wait for capacity until the deadline, then answer round 0 with
      `degraded: true`) or "reject" (429 with Retry-After: retry_after_s at once).
    settings_ttl_s: how long an index's `index.tour.*` settings are cached.
    settings_cache_size: how many (caller, index) settings answers are kept, least recently
        used dropped first.
    service_credentials: "USER:PASSWORD" of the sidecar's own service identity: it reads
        index settings and the labeler vector store with it, and nothing else; None (the
        default) reads settings with each caller's own credentials, and the store
        anonymously (a secured cluster then refuses it, which costs only speed).
    vector_store: keep a dual-encoder labeler's doc vectors in the engine
        (es_tour.pipeline.VectorStore), shared by every sidecar and kept across restarts.
    store_preload_docs: how many of the store's vectors each worker reads into memory
        ahead of its searches, over every index (~2 KiB each at 384-d); 0 reads none.
    doc_cache_mib: MiB of the docs each worker keeps, per caller, index and doc version, of
        those its searches fetched to label (es_tour.pipeline.DocCache); 0 keeps none.
    doc_cache_ttl_s: how long a kept doc lives: a change of a caller's field-level security
        reaches its labels within it.
    doc_cache_preload_docs: how many of a caller's docs of an index each worker reads into
        the doc cache ahead of its searches, as that caller, once per doc_cache_ttl_s after
        its first search there that fetched a doc; 0 reads none.
    ranking_cache_ttl_s: how long each worker keeps a full refinement's ranking for the
        same caller's later pages of the same search (es_tour.server._rankings, at most
        16 MiB of them, shared by the workers), which then cost one page fetch; 0 keeps
        none.
    upstream_tls: how an https upstream is checked (its CA, verification, a client
        certificate), for the proxy and the official client alike. The client certificate
        is the sidecar's own identity: it is shown only on the sidecar's own calls (settings
        read with service_credentials, the vector store, health), never on a caller's.
    client_cert_for_callers: show the client certificate on callers' calls too (forwarded
        requests, and every engine call of their searches). An engine that authenticates
        by certificate then takes every caller without credentials of its own, and on
        OpenSearch every caller, for the sidecar: only for a cluster that authenticates
        callers otherwise and wants the certificate from every connection.
    tls_cert, tls_key: PEM certificate and key the sidecar itself listens with (https);
        None listens in plain http.
    playground: serve the playground page under /_tour/playground (`es-tour serve
        --playground`); off, those paths go to the engine like any path the sidecar does
        not answer itself.
    window: how many of a search's first hits es-tour orders (`index.tour.window`); the
      engine's own order goes on past them.
    method, labeler, encoder, vector_field, text_fields, options: the server defaults,
    used when neither the request's `ext.tour` nor the index settings say otherwise.
    """

    upstream: str
    engine: str | None = None
    deadline_ms: int = 10_000
    max_k: int = 1000
    max_size: int = 1000
    window: int = DEFAULT_WINDOW
    max_rounds: int = 10
    max_top_k: int = 1000
    max_timeout_ms: int = 60_000
    max_body_bytes: int = 10 * 1024 * 1024
    model_threads: int = 2
    label_batch: int = 16
    max_refinements: int = 4
    workers: int = 1
    when_full: str = "queue"
    retry_after_s: int = 1
    settings_ttl_s: float = 5.0
    settings_cache_size: int = 1024
    service_credentials: str | None = field(default=None, repr=False)
    vector_store: bool = True
    store_preload_docs: int = PRELOAD_DOCS
    doc_cache_mib: int = DOC_CACHE_MIB
    doc_cache_ttl_s: float = DOC_CACHE_TTL_S
    doc_cache_preload_docs: int = DOC_PRELOAD_DOCS
    ranking_cache_ttl_s: float = RANKING_TTL_S
    upstream_tls: UpstreamTls = field(default_factory=UpstreamTls)
    client_cert_for_callers: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
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
    access_log: bool = False  # one line per request on the es_tour.server.access logger
    playground: bool = False

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ConfigError("upstream must name at least one http(s) URL")
        for url in self.upstreams:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"upstream must be http(s) URLs, got {redact(url)!r}")
            if parts.username is not None or parts.password is not None:
                raise ConfigError(
                    f"upstream {redact(url)} carries credentials; the sidecar sends each "
                    "caller's own, never its own. Drop them from the URL (to read index "
                    "settings and the vector store as the sidecar, use "
                    "service_credentials / --service-credentials)")
        if self.service_credentials is not None and ":" not in self.service_credentials:
            raise ConfigError("service_credentials must be USER:PASSWORD")
        if self.tls_key is not None and self.tls_cert is None:
            raise ConfigError("tls_key needs tls_cert, the certificate it belongs to")
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"{name} [{path}] is not a readable file")
        if self.engine is not None and self.engine not in ENGINE_KINDS:
            raise ConfigError(f"engine must be one of {list(ENGINE_KINDS)} or None, "
                              f"got {self.engine!r}")
        if self.when_full not in WHEN_FULL:
            raise ConfigError(f"when_full must be one of {list(WHEN_FULL)}, got {self.when_full!r}")
        for name in ("deadline_ms", "max_k", "max_size", "window", "max_rounds", "max_top_k",
                     "max_timeout_ms", "max_body_bytes", "model_threads", "label_batch",
                     "max_refinements", "workers", "retry_after_s", "max_connections",
                     "settings_cache_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("store_preload_docs", "doc_cache_mib", "doc_cache_preload_docs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        for name in ("settings_ttl_s", "connect_timeout_s", "upstream_timeout_s",
                     "doc_cache_ttl_s", "ranking_cache_ttl_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a number >= 0, got {value!r}")
        if not self.text_fields:
            raise ConfigError("text_fields must name at least one field")
        # the certificate's scope is the sidecar's to say, whatever upstream_tls was given
        object.__setattr__(self, "upstream_tls", replace(
            self.upstream_tls, client_cert_for_callers=self.client_cert_for_callers))
        check_method(self.method)

    def defaults(self) -> dict[str, Any]:
        """The server's layer of `_options.resolve`: what a search runs with when neither
        its `ext.tour` nor the index's settings say otherwise."""
        return {"method": self.method, "labeler": self.labeler, "encoder": self.encoder,
                "vector_field": self.vector_field, "text_fields": self.text_fields,
                "window": self.window, "options": dict(self.options)}

    @property
    def upstreams(self) -> tuple[str, ...]:
        """The nodes' base URLs, in the order given."""
        return tuple(url.strip().rstrip("/") for url in self.upstream.split(",") if url.strip())

    @property
    def service_identity(self) -> dict[str, str]:
        """The headers of the sidecar's service identity; empty: anonymous."""
        if not self.service_credentials:
            return {}
        token = base64.b64encode(self.service_credentials.encode()).decode()
        return {"authorization": f"Basic {token}"}

    @property
    def base_url(self) -> str:
        return self.upstreams[0]


def redact(url: str) -> str:
    """`url` with any user and password in it replaced by ***, for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
