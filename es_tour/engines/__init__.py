"""One async interface over the official Elasticsearch and OpenSearch clients.

`elasticsearch` and `opensearchpy` are imported nowhere else in es_tour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from es_tour.engines._base import ClientEngine, text_query
from es_tour.engines._elasticsearch import ElasticsearchEngine
from es_tour.engines._hits import first_of_each
from es_tour.engines._json import dumps as json_bytes
from es_tour.engines._keys import hit_name, ids_query, names_by_key
from es_tour.engines._opensearch import OpenSearchEngine
from es_tour.engines._types import (
    BulkReport,
    Hit,
    IndexSpec,
    KnnReturns,
    Overview,
    SearchEngine,
    Similarity,
    TermStats,
    VectorField,
    doc_key,
    key_seq_no,
)
from es_tour.errors import ConfigError
from es_tour.tls import UpstreamTls, uses_https

# each takes the URL (or the URLs of one cluster's nodes) of the engine it adapts, and
# its client's TLS and authentication options
ENGINES: dict[str, Callable[..., ClientEngine]] = {
    "opensearch": OpenSearchEngine,
    "elasticsearch": ElasticsearchEngine,
}
# the official clients' names for the credentials of the client's own calls
_AUTH_OPTION = {"opensearch": "http_auth", "elasticsearch": "basic_auth"}


def connect(engine: str, url: str | Sequence[str], tls: UpstreamTls | None = None,
            auth: tuple[str, str] | None = None) -> ClientEngine:
    """An adapter for `engine` ("opensearch" or "elasticsearch") at `url`, or at several
    nodes of one cluster (the client fails over between them). `tls` says how to check an
    https engine (default: the system's CAs); `auth` is (user, password) for every call,
    which the sidecar never gives (its calls carry each caller's own headers). A client
    certificate that `tls` keeps to the process's own calls (`own_calls_only`) goes on a
    connection pool of its own, which only `ClientEngine.as_own_identity` views use."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine [{engine}]; choose one of: {', '.join(ENGINES)}")
    options: dict[str, object] = {}
    if uses_https(url):  # the clients refuse TLS options on a plain http node
        tls = tls or UpstreamTls()
        options["ssl_context"] = tls.context(for_callers=True)
        if tls.own_calls_only:
            options["own_ssl_context"] = tls.context()
    if auth is not None:
        options[_AUTH_OPTION[engine]] = auth
    return ENGINES[engine](url, **options)


__all__ = [
    "ENGINES",
    "BulkReport",
    "ClientEngine",
    "ElasticsearchEngine",
    "Hit",
    "IndexSpec",
    "KnnReturns",
    "OpenSearchEngine",
    "Overview",
    "SearchEngine",
    "Similarity",
    "TermStats",
    "VectorField",
    "connect",
    "doc_key",
    "first_of_each",
    "hit_name",
    "ids_query",
    "json_bytes",
    "key_seq_no",
    "names_by_key",
    "text_query",
]
