"""The es-tour sidecar: an HTTP proxy in front of Elasticsearch or OpenSearch.

Searches on indices with `index.tour.enabled: true`, or carrying `ext.tour`, are answered
by the pipeline (TOUR, Rocchio or an agent) in the engine's own response shape; every
other request is proxied verbatim.
"""

from __future__ import annotations

from es_tour.server._app import create_app
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._ops import DEGRADED_HEADER
from es_tour.server._run import BackgroundServer, parse_listen, serve
from es_tour.server._upstream import PASSTHROUGH_HEADER

__all__ = [
    "DEGRADED_HEADER",
    "PASSTHROUGH_HEADER",
    "BackgroundServer",
    "Models",
    "ServerConfig",
    "create_app",
    "parse_listen",
    "serve",
]
