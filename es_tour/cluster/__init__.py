"""Local engine lifecycle: fetch from Maven Central, configure, start, stop."""

from es_tour.cluster._distribution import (
    DISTRIBUTIONS,
    ELASTICSEARCH_VERSION,
    OPENSEARCH_VERSION,
    Distribution,
    distribution,
)
from es_tour.cluster._node import DEFAULT_PORTS, LocalCluster, LocalNode, NodeStatus
from es_tour.cluster._security import INDEX_A, INDEX_B, USERS

__all__ = [
    "DEFAULT_PORTS",
    "DISTRIBUTIONS",
    "ELASTICSEARCH_VERSION",
    "INDEX_A",
    "INDEX_B",
    "OPENSEARCH_VERSION",
    "USERS",
    "Distribution",
    "LocalCluster",
    "LocalNode",
    "NodeStatus",
    "distribution",
]
