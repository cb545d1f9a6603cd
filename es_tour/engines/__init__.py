"""One async interface over the official Elasticsearch and OpenSearch clients.

`elasticsearch` and `opensearchpy` are imported nowhere else in es_tour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from es_tour.engines._base import ClientEngine
from es_tour.engines._elasticsearch import ElasticsearchEngine
from es_tour.engines._opensearch import OpenSearchEngine
from es_tour.engines._types import (
    BulkReport,
    Hit,
    IndexSpec,
    KnnReturns,
    SearchEngine,
    TermStats,
    VectorField,
)
from es_tour.errors import ConfigError

# each takes the URL (or the URLs of one cluster's nodes) of the engine it adapts
ENGINES: dict[str, Callable[[str | Sequence[str]], ClientEngine]] = {
    "opensearch": OpenSearchEngine,
    "elasticsearch": ElasticsearchEngine,
}


def connect(engine: str, url: str | Sequence[str]) -> ClientEngine:
    """An adapter for `engine` ("opensearch" or "elasticsearch") at `url`, or at several
    nodes of one cluster (the client fails over between them)."""
    try:
        return ENGINES[engine](url)
    except KeyError:
        raise ConfigError(
            f"unknown engine [{engine}]; choose one of: {', '.join(ENGINES)}"
        ) from None


__all__ = [
    "ENGINES",
    "BulkReport",
    "ClientEngine",
    "ElasticsearchEngine",
    "Hit",
    "IndexSpec",
    "KnnReturns",
    "OpenSearchEngine",
    "SearchEngine",
    "TermStats",
    "VectorField",
    "connect",
]
