"""`es-tour serve`: the sidecar proxy that answers TOUR searches in front of an engine."""

from __future__ import annotations

from typing import Annotated

import typer

from es_tour.cli import app
from es_tour.cli._errors import clean_errors
from es_tour.server import ServerConfig, parse_listen, serve


@app.command("serve")
@clean_errors
def serve_command(
    upstream: Annotated[list[str], typer.Option(
        help="the engine's URL, e.g. http://127.0.0.1:9200; repeat it (or separate URLs with "
             "commas) for several nodes of one cluster, which searches fail over between")],
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on")] = "127.0.0.1:9201",
    engine: Annotated[str | None, typer.Option(
        help="opensearch or elasticsearch (default: detected from the upstream)")] = None,
    method: Annotated[str, typer.Option(
        help="default method when neither request nor index names one")] = "tour-hard",
    labeler: Annotated[str, typer.Option(help="default labeler model")] = "default",
    deadline_ms: Annotated[int, typer.Option(
        help="round-0 results are returned when a refinement runs longer")] = 10_000,
    max_k: Annotated[int, typer.Option(help="largest k and from+size a request may ask")] = 1000,
    settings_ttl: Annotated[float, typer.Option(help="seconds index settings are cached")] = 5.0,
    log_level: str = "info",
) -> None:
    """Proxy every request to --upstream; answer `_search` on TOUR-enabled indices (or with
    ext.tour) with the configured method, in the engine's own response shape."""
    config = ServerConfig(upstream=",".join(upstream), engine=engine, method=method,
                          labeler=labeler, deadline_ms=deadline_ms, max_k=max_k,
                          settings_ttl_s=settings_ttl)
    parse_listen(listen)
    typer.echo(f"es-tour sidecar on http://{listen} -> {', '.join(config.upstreams)}")
    serve(config, listen, log_level)
