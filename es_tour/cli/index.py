"""`es-tour index` and `es-tour warm`: embed and bulk-index a BEIR corpus, and fill the
labeler's vector store for an index."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from es_tour.cli._app import app
from es_tour.cli._checks import CaCerts, ClientCert, ClientKey, VerifyCerts, engine_target
from es_tour.cli._errors import clean_errors
from es_tour.cli._shared import Dataset, Engine, Index, Url, _context, _ingest, console
from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine
from es_tour.models import load_labeler
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, warm
from es_tour.server._options import index_settings

Qrels = Annotated[bool, typer.Option(
    help="also store the dataset's judgements (every qrels split) in the side index "
         "<index>-qrels, where the playground finds them")]
Metadata = Annotated[bool, typer.Option(
    help="also index each doc's synthetic `year` (integer) and `topic` (keyword), to "
         "filter and facet on (the application workload of `make bench-app`)")]

Rate = Annotated[float | None, typer.Option(
    help="embed at most this many docs per second (the labeler shares the machine)")]
Warm = Annotated[bool, typer.Option(
    help="then fill the default labeler's vector store for the index (as es-tour warm)")]


@app.command("index")
@clean_errors
def index_command(
    dataset: Dataset,
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    replace: bool = False,
    qrels: Qrels = False,
    metadata: Metadata = False,
    warm: Warm = False,
    rate: Rate = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Embed a BEIR corpus with the retriever and bulk-index it (re-runs never duplicate)."""
    data = BeirDataset(dataset)
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)

    async def run() -> None:
        context = _context(target, index or data.name, "default")
        async with context.engine:
            await _ingest(context, data, replace, qrels, metadata)
            if warm:
                await context.engine.refresh(context.index)
                await _warm(context.engine, context.index, None, None, rate)

    asyncio.run(run())


@app.command("warm")
@clean_errors
def warm_command(
    index: Annotated[str, typer.Option(help="the index whose docs to store vectors of")],
    engine: Engine = "opensearch",
    url: Url = None,
    labeler: Annotated[str | None, typer.Option(
        help="a dual-encoder labeler, or an ensemble (model^weight+model^weight: every "
             "member's store is filled) (default: the index's index.tour.labeler, else "
             "the default labeler)")] = None,
    text_fields: Annotated[str | None, typer.Option(
        help="comma-separated fields the labeler reads (default: the index's "
             "index.tour.text_fields, else title,text)")] = None,
    rate: Rate = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Fill the labeler's vector store in the engine for every doc of --index, so that no
    refined search waits for a doc to be embedded. Resumable: a re-run skips what is
    stored. Credentials: ES_TOUR_USER / ES_TOUR_PASSWORD, with read on the index and
    write on es-tour-vectors-*."""
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    fields = tuple(f.strip() for f in text_fields.split(",") if f.strip()) if text_fields \
        else None

    async def run() -> None:
        async with target.connect() as adapter:
            await _warm(adapter, index, labeler, fields, rate)

    asyncio.run(run())


async def _warm(adapter: ClientEngine, index: str, labeler_name: str | None,
                text_fields: tuple[str, ...] | None, rate: float | None) -> None:
    """`warm` with the index's own settings where the options say nothing."""
    with adapter.engine_errors():
        settings = index_settings(await adapter.settings(index))
        total = await adapter.count(index)
    name = labeler_name or settings.get("labeler") or "default"
    labeler = load_labeler(name)
    fields = text_fields or settings.get("text_fields") or DEFAULT_TEXT_FIELDS
    with Progress(TextColumn(f"warming {index}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), transient=True,
                  console=console) as progress, adapter.engine_errors():
        task = progress.add_task("docs", total=total)
        report = await warm(adapter, index, labeler, fields, rate=rate,
                            on_batch=lambda docs: progress.advance(task, docs))
    console.print(f"[bold]{index}[/]: {report.written} vectors stored, {report.stored} "
                  f"already stored, of {report.docs} ({report.seconds:.0f} s)\n"
                  f"vector store{'s' if len(report.stores) > 1 else ''}: "
                  f"{', '.join(report.stores)}")
