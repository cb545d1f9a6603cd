"""`es-tour serve`: the sidecar proxy that answers TOUR searches in front of an engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from es_tour.cli._app import app
from es_tour.cli._checks import (
    CaCerts,
    ClientCert,
    ClientKey,
    VerifyCerts,
    path_text,
    renamed,
    upstream_tls,
)
from es_tour.cli._errors import clean_errors, err_console
from es_tour.errors import ConfigError
from es_tour.pipeline import DOC_CACHE_MIB, DOC_CACHE_TTL_S, DOC_PRELOAD_DOCS, PRELOAD_DOCS
from es_tour.recommended import RECOMMENDED_METHOD, RECOMMENDED_OPTIONS
from es_tour.server import ServerConfig, parse_listen, serve
from es_tour.server._config import RANKING_TTL_S
from es_tour.server._models import check_labeler, check_model
from es_tour.server._workers import default_workers

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's


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
        help="method run when neither the request's ext.tour nor the index's "
             "index.tour.method names one; its options then come from the request, the "
             "index's index.tour.* settings, or the method's own defaults; the default, "
             "the recommended method (es_tour/recommended.py), comes with its recommended "
             "options")] = RECOMMENDED_METHOD,
    labeler: Annotated[str, typer.Option(
        help="default labeler: a registry name, or a model directory (es-tour export, "
             "train-reranker), dual or cross")] = "default",
    encoder: Annotated[str, typer.Option(
        help="default query encoder: a registry name, or a dual model directory (es-tour "
             "export); its dimension must be the index's vector field's")] = "retriever",
    deadline_ms: Annotated[int, typer.Option(
        help="round-0 results are returned when a refinement runs longer")] = 10_000,
    max_k: Annotated[int, typer.Option(help="largest k a request may ask")] = 1000,
    max_size: Annotated[int, typer.Option(help="largest from+size a request may ask")] = 1000,
    max_rounds: Annotated[int, typer.Option(help="largest max_rounds a request may ask")] = 10,
    max_top_k: Annotated[int, typer.Option(help="largest agent top_k a request may ask")] = 1000,
    max_timeout_ms: Annotated[int, typer.Option(
        help="largest ext.tour.timeout_ms a request may ask")] = 60_000,
    max_body_bytes: Annotated[int, typer.Option(
        help="largest _search body read (413 past it)")] = 10 * 1024 * 1024,
    workers: Annotated[int | None, typer.Option(
        show_default=False,
        help="processes serving on the one socket, each with its own models and "
             "--model-threads threads (default: the "
             "machine's cores, or the container's CPU quota)")] = None,
    model_threads: Annotated[int, typer.Option(
        help="threads running labeler batches, in each worker process")] = 2,
    model_workers: Annotated[int | None, typer.Option(
        hidden=True, help="the old name of --model-threads")] = None,
    max_refinements: Annotated[int, typer.Option(
        help="TOUR requests refining at once, in each worker; others wait or get "
             "429")] = 4,
    when_full: Annotated[str, typer.Option(
        help="queue (wait until the deadline, then round 0, degraded) or reject (429)")] = "queue",
    settings_ttl: Annotated[float, typer.Option(help="seconds index settings are cached")] = 5.0,
    service_credentials: Annotated[str | None, typer.Option(
        "--service-credentials", "--settings-credentials",
        envvar=["ES_TOUR_SERVICE_CREDENTIALS", "ES_TOUR_SETTINGS_CREDENTIALS"],
        show_default=False,
        help="USER:PASSWORD of the sidecar's own identity: it reads index.tour.* settings "
             "and the labeler vector store with it, and nothing else (default: settings "
             "with each caller's own credentials, the store anonymously); give it by its "
             "environment variable, not on the command line")] = None,
    vector_store: Annotated[bool, typer.Option(
        "--vector-store/--no-vector-store",
        help="keep the labeler's doc vectors in the engine (es-tour-vectors-* indices), "
             "shared by every sidecar and kept across restarts")] = True,
    store_preload_docs: Annotated[int, typer.Option(
        min=0, help="labeler vectors each worker reads from the store into memory ahead of "
                    "its searches, over every index (~2 KiB each at 384-d; 0: none)")
    ] = PRELOAD_DOCS,
    doc_cache_mib: Annotated[int, typer.Option(
        min=0, help="MiB of the docs each worker keeps, per caller and doc version, of those "
                    "its searches fetched to label, so later searches do not fetch them "
                    "again (0: none)")] = DOC_CACHE_MIB,
    doc_cache_ttl: Annotated[float, typer.Option(
        min=0, help="seconds a kept doc lives: how long a change of a caller's field-level "
                    "security may take to reach its labels")] = DOC_CACHE_TTL_S,
    doc_cache_preload_docs: Annotated[int, typer.Option(
        min=0, help="docs of an index each worker reads into the doc cache ahead of a "
                    "caller's searches, as that caller, once per --doc-cache-ttl after its "
                    "first search there that fetched a doc (0: none; set 0 where each end "
                    "user searches with credentials of their own)")] = DOC_PRELOAD_DOCS,
    ranking_cache_ttl: Annotated[float, typer.Option(
        min=0, help="seconds the sidecar keeps a refined search's ranking (its workers "
                    "share them) for the same caller's later pages of that search, which "
                    "then cost one page fetch (0: none)")] = RANKING_TTL_S,
    log_level: Annotated[str, typer.Option(help=f"one of {', '.join(LOG_LEVELS)}")] = "info",
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
    client_cert_for_callers: Annotated[bool, typer.Option(
        "--client-cert-for-callers",
        help="show --client-cert on callers' requests too, not only on the sidecar's own "
             "calls (settings as the service, vector store, health). An engine that "
             "authenticates by certificate then takes callers for the sidecar: only for a "
             "cluster that wants the certificate on every connection and authenticates "
             "callers otherwise (docs/security.md#tls)")] = False,
    tls_cert: Annotated[Path | None, typer.Option(
        help="PEM certificate to listen with: the sidecar then serves https")] = None,
    tls_key: Annotated[Path | None, typer.Option(
        help="the --tls-cert certificate's PEM key, when its file does not hold it")] = None,
    access_log: Annotated[bool, typer.Option(
        "--access-log/--no-access-log",
        help="log one line per request (method, path, status, ms, refined or why not); "
             "never query text or credentials")] = False,
    playground: Annotated[bool, typer.Option(
        "--playground/--no-playground",
        help="serve the playground, a page comparing two methods, at /_tour/playground; "
             "off, those paths go to the engine like any other")] = False,
) -> None:
    """Proxy every request to --upstream; answer `_search` on TOUR-enabled indices (or with
    ext.tour) with the configured method, in the engine's own response shape."""
    config = ServerConfig(upstream=",".join(upstream), engine=engine, method=method,
                          options=server_options(method),
                          labeler=labeler, encoder=encoder,
                          deadline_ms=deadline_ms, max_k=max_k, max_size=max_size,
                          max_rounds=max_rounds, max_top_k=max_top_k,
                          max_timeout_ms=max_timeout_ms, max_body_bytes=max_body_bytes,
                          model_threads=renamed(model_threads, model_workers,
                                                "--model-workers", "--model-threads"),
                          max_refinements=max_refinements,
                          workers=default_workers() if workers is None else workers,
                          when_full=when_full, settings_ttl_s=settings_ttl,
                          service_credentials=service_credentials,
                          vector_store=vector_store, store_preload_docs=store_preload_docs,
                          doc_cache_mib=doc_cache_mib, doc_cache_ttl_s=doc_cache_ttl,
                          doc_cache_preload_docs=doc_cache_preload_docs,
                          ranking_cache_ttl_s=ranking_cache_ttl,
                          upstream_tls=upstream_tls(ca_certs, client_cert, client_key,
                                                    verify_certs),
                          client_cert_for_callers=client_cert_for_callers,
                          tls_cert=path_text(tls_cert), tls_key=path_text(tls_key),
                          access_log=access_log, playground=playground)
    parse_listen(listen)
    if log_level not in LOG_LEVELS:
        raise ConfigError(f"--log-level must be one of {list(LOG_LEVELS)}, got {log_level!r}")
    check_labeler(labeler)  # an unknown or unbuilt model fails now, not at startup
    check_model(encoder)

    def ready() -> None:
        scheme = "https" if config.tls_cert else "http"
        processes = f" ({config.workers} workers)" if config.workers > 1 else ""
        typer.echo(f"es-tour sidecar on {scheme}://{listen} -> {', '.join(config.upstreams)}"
                   f"{processes}")
        if config.playground:
            typer.echo(f"playground: {scheme}://{listen}/_tour/playground")

    serve_until_stopped(config, listen, log_level, ready)


def serve_until_stopped(config: ServerConfig, listen: str, log_level: str,
                        ready: Callable[[], None]) -> None:
    """The sidecar in the foreground; Ctrl-C ends it with exit status 0 and one line."""
    serve(config, listen, log_level, ready=ready)
    err_console.print("sidecar stopped")


def server_options(method: str) -> dict[str, Any]:
    """The options `serve` runs its default method with: the recommended method's own,
    or for another method its defaults, k 10 a round."""
    return dict(RECOMMENDED_OPTIONS) if method == RECOMMENDED_METHOD else {"k": 10}
