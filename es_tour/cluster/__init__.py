"""Local engine lifecycle: fetch from Maven Central, configure, start, stop."""

from es_tour.cluster._distribution import (
    ELASTICSEARCH_CURRENT,
    ELASTICSEARCH_VERSION,
    OPENSEARCH_CURRENT,
    OPENSEARCH_VERSION,
    VERSIONS,
    Distribution,
    distribution,
)
from es_tour.cluster._node import DEFAULT_PORTS, LocalCluster, LocalNode, NodeStatus
from es_tour.cluster._security import INDEX_A, INDEX_B, USERS

__all__ = [
    "DEFAULT_PORTS",
    "ELASTICSEARCH_CURRENT",
    "ELASTICSEARCH_VERSION",
    "INDEX_A",
    "INDEX_B",
    "OPENSEARCH_CURRENT",
    "OPENSEARCH_VERSION",
    "USERS",
    "VERSIONS",
    "Distribution",
    "LocalCluster",
    "LocalNode",
    "NodeStatus",
    "distribution",
]
