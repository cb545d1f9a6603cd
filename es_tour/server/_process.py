"""One sidecar process under uvicorn: its config, its access log and its drain time, the
same for a lone sidecar (`_run.serve`) and for each worker of several (`_workers`)."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from es_tour.server._app import create_app
from es_tour.server._config import ServerConfig
from es_tour.server._models import Models
from es_tour.server._ops import access_log
from es_tour.server._rounds import FALLBACK_TIMEOUT_MS
from es_tour.server._upstream import SettingsEpoch

if TYPE_CHECKING:
    import uvicorn


def uvicorn_config(config: ServerConfig, host: str, port: int, models: Models | None,
                   log_level: str, settings_epoch: SettingsEpoch | None = None
                   ) -> uvicorn.Config:
    import uvicorn

    return uvicorn.Config(create_app(config, models, settings_epoch), host=host, port=port,
                          log_level=log_level,
                          access_log=False, lifespan="on",
                          timeout_graceful_shutdown=drain_seconds(config),
                          ssl_certfile=config.tls_cert, ssl_keyfile=config.tls_key)


def setup_access_log(config: ServerConfig) -> None:
    """The access log's own handler, when switched on: uvicorn's logging setup covers its
    own loggers only."""
    if config.access_log and not access_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False


def drain_seconds(config: ServerConfig) -> int:
    """How long a shutdown waits for requests in flight: a refinement at the configured
    deadline, then its round-0 fallback. A request that asked for a longer timeout_ms is
    cut when this runs out."""
    return math.ceil((config.deadline_ms + FALLBACK_TIMEOUT_MS) / 1000)
