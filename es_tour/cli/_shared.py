"""What the dataset commands (index, eval, tune, train-agent, demo) share: their common
options, the search context on an index (es-tour's own, ingested first, or the team's,
searched as it is), the labelling choice (corpus vectors or live), the methods' table,
and index.tour.* settings put on an index."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from es_tour.cli._checks import EngineTarget
from es_tour.cli._errors import err_console
from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine
from es_tour.errors import ConfigError
from es_tour.evaluation import (
    MethodReport,
    MethodSpec,
    build_methods,
    corpus_vectors_pay,
    evaluate,
    expected_pairs,
    progress_bar,
)
from es_tour.ingest import ingest
from es_tour.judgements import store_qrels
from es_tour.metrics import HURT_AT, Robustness
from es_tour.models import EnsembleLabeler, Labeler, has_corpus_embeddings, vector_labelers
from es_tour.pipeline import SearchContext, open_context
from es_tour.server import ServerConfig
from es_tour.server._options import Resolved, check_encoder_fits, index_settings, resolve

console = Console()

Dataset = Annotated[
    Path, typer.Option(help="a BEIR directory (corpus.jsonl, queries.jsonl, qrels/); for "
                            "an index es-tour did not make, queries.jsonl and qrels/ only")
]
Engine = Annotated[str, typer.Option(help="opensearch or elasticsearch")]
Url = Annotated[str | None, typer.Option(help="engine URL (default: the local node's)")]
Index = Annotated[str | None, typer.Option(help="index name (default: the dataset's name)")]
Labeler_ = Annotated[str, typer.Option(
    "--labeler", help="the labeler: a registry model name, a model directory, or models "
                      "joined by + (model^weight+model^weight)")]

CorpusVectors = Annotated[bool | None, typer.Option(
    "--corpus-vectors/--no-corpus-vectors",
    help="a dual-encoder labeler encodes the whole corpus once (cached in the model cache) "
         "and labels by dot products, or encodes each labelled doc; the same φ. Default: "
         "corpus vectors when cached, or when the run labels at least half as many pairs "
         "as the corpus has docs")]
Output = Annotated[Path | None, typer.Option(help="write results JSON here")]


def _context(target: EngineTarget, index: str, labeler: str) -> SearchContext:
    return open_context(target.engine, target.url, index, labeler=labeler, tls=target.tls,
                        auth=target.auth)


async def _ingest(context: SearchContext, dataset: BeirDataset, replace: bool,
                  qrels: bool = False, metadata: bool = False) -> None:
    if qrels:
        stored = await store_qrels(context.engine, dataset, context.index)
        console.print(f"stored {stored.queries} judged queries ({', '.join(stored.splits)}) "
                      f"in [bold]{stored.index}[/]")
    report = await ingest(
        context.engine,
        dataset,
        context.index,
        context.encoder,
        replace=replace,
        if_missing=not replace,
        metadata=metadata,
    )
    if report.skipped:
        console.print(f"index [bold]{report.index}[/] already holds all {report.docs} docs")
    else:
        if report.rebuilt:
            console.print(f"index [bold]{report.index}[/] had other mappings: rebuilt it")
        console.print(
            f"indexed {report.indexed} docs into [bold]{report.index}[/] "
            f"({report.docs_per_s:.0f} docs/s, {report.retried} retried)"
        )


async def _searchable(context: SearchContext, data: BeirDataset, labeler: str,
                      target: EngineTarget) -> tuple[SearchContext, bool]:
    """The context to run the dataset's queries in, and whether the index is the team's own.

    An index es-tour did not make is searched as it is and never written: with the text
    fields, vector field and query encoder its index.tour.* settings name, resolved and
    checked as the sidecar does, and `labeler` as given; the dataset's qrels name its doc
    ids. Any other index is es-tour's: ingested first (nothing to do once complete)."""
    adapter, index = context.engine, context.index
    with adapter.engine_errors():
        exists = await adapter.exists(index)
        if not exists and not (data.root / "corpus.jsonl").is_file():
            raise ConfigError(f"index [{index}] does not exist, and {data.root} has no "
                              "corpus.jsonl to build it from")
        if not exists or await adapter.made_by_es_tour(index):
            await _ingest(context, data, replace=False)
            found = await adapter.vector_field(index, context.vector_field)
            return replace(context, vector_similarity=found.similarity,
                           engine=adapter.with_vector_field(found.name, found.in_source,
                                                            found.similarity)), False
        flat = await adapter.settings(index)
        config = ServerConfig(upstream=target.url, engine=target.engine)
        chosen = replace(resolve({}, index_settings(flat), config.defaults()), labeler=labeler)
        out = _resolved_context(context, chosen, labeler)
        found = await adapter.vector_field(index, chosen.vector_field)
    check_encoder_fits(found, chosen.encoder, out.encoder.dimension, index)
    out = replace(out, vector_similarity=found.similarity,
                  engine=adapter.with_vector_field(found.name, found.in_source,
                                                   found.similarity))
    console.print(Text(
        f"index {index} is not es-tour's: searched as it is, never written, with text fields "
        f"{','.join(chosen.text_fields)}, vector field {chosen.vector_field} and encoder "
        f"{chosen.encoder} (its index.tour.* settings, else the sidecar's defaults)"),
        soft_wrap=True)
    return out, True


def _resolved_context(context: SearchContext, chosen: Resolved, labeler: str = "default",
                      encoder: str = "retriever") -> SearchContext:
    """`context` (opened with the models `labeler` and `encoder`) with the models and
    fields the resolution chose, loaded as the sidecar loads them when they differ."""
    from es_tour.server import Models

    out = replace(context, text_fields=chosen.text_fields, vector_field=chosen.vector_field)
    models = Models(chosen.encoder)
    if chosen.labeler != labeler:
        out = replace(out, labeler=models.labeler(chosen.labeler))
    if chosen.encoder != encoder:
        out = replace(out, encoder=models.encoder)
    return out


async def _apply_settings(out: Console, adapter: ClientEngine, index: str,
                          settings: Mapping[str, Any], why: str, config: ServerConfig
                          ) -> Resolved:
    """Put `settings` on `index` (the plugin validates them: a bad one is the engine's
    400), say which and why in one line on `out`, and resolve what the index now names as
    the sidecar does (`_options.resolve`, no request layer)."""
    with adapter.engine_errors():
        await adapter.put_settings(index, settings)
        flat = await adapter.settings(index)
    out.print(Text.from_markup(f"applied to [bold]{escape(index)}[/] "
                               f"{escape(settings_text(settings))}: {escape(why)}"),
              soft_wrap=True)
    return resolve({}, index_settings(flat), config.defaults())


def settings_text(settings: Mapping[str, Any]) -> str:
    """`index.tour.{method: hybrid-tour, k: 10, ...}`: flat index.tour.* settings, short."""
    prefix = "index.tour."
    values = ", ".join(f"{key.removeprefix(prefix)}: "
                       f"{value if isinstance(value, str) else json.dumps(value)}"
                       for key, value in settings.items())
    return f"{prefix}{{{values}}}"


# The method column's share of 80 columns beside the six figures: a longer label shows as
# its method's name and a key, spelled out under the table, so no label is cut off.
LABEL_WIDTH = 18


def short_labels(labels: Sequence[str]) -> dict[str, str]:
    """Each label that fits `LABEL_WIDTH` as itself, a longer one as `name [n]`."""
    long = [label for label in dict.fromkeys(labels) if len(label) > LABEL_WIDTH]
    keys = {label: f"{label.split(':')[0]} [{n}]" for n, label in enumerate(long, start=1)}
    return {label: keys.get(label, label) for label in labels}


def print_table(out: Console, title: str, reports: list[MethodReport],
                robust: Mapping[str, Robustness] | None = None) -> None:
    """The methods' figures, with `robust`'s per-query comparison to the reference where
    given, then the legend of the labels `short_labels` shortened, each on one line (a
    terminal narrower than a label wraps it, but it stays one string)."""
    shown = short_labels([report.spec.label for report in reports])
    against = ["+/- queries", "RI", f"hurt ≥{HURT_AT}"] if robust else []
    table = Table(
        Column("method", no_wrap=True, min_width=LABEL_WIDTH),
        "nDCG@10", "R@100", "MRR@10", "p50 ms", "p95 ms", "pairs/q", *against, title=title
    )
    for report in reports:
        s = report.summary()
        r = (robust or {}).get(report.spec.label)
        table.add_row(
            Text(shown[report.spec.label]),
            f"{s['ndcg@10']:.4f}",
            f"{s['recall@100']:.4f}",
            f"{s['mrr@10']:.4f}",
            f"{s['latency_ms_p50']:.1f}",
            f"{s['latency_ms_p95']:.1f}",
            f"{s['pairs_scored_mean']:.1f}",
            *([f"+{r.wins}/-{r.losses}", f"{r.index:+.2f}", f"{r.hurt_share:.1%}"] if r
              else ["reference", "", ""] if robust else []),
        )
    out.print(table)
    for label, short in shown.items():
        if short != label:
            out.print(Text(f"  {short[short.rindex('['):]} {label}"), soft_wrap=True)


async def _evaluate(
    target: EngineTarget,
    data: BeirDataset,
    index: str | None,
    methods: list[MethodSpec],
    split: str,
    max_queries: int | None,
    labeler: str,
    cold_labels: bool,
    corpus_vectors: bool | None,
) -> list[MethodReport]:
    context = _context(target, index or data.name, labeler)
    queries = len(list(data.queries(split))[:max_queries])
    # a typo fails now, not after the ingest
    build_methods(context, methods, data.qrels(split), data.queries(split))
    async with context.engine:
        context, own = await _searchable(context, data, labeler, target)
        _choose_labelling(context, data, own, corpus_vectors,
                          lambda: expected_pairs(methods, queries, cold_labels))
        with progress_bar(f"{data.name} {split}", len(methods) * queries,
                          err_console) as advance:
            return await evaluate(context, data, methods, split=split,
                                  max_queries=max_queries, cold_labels=cold_labels,
                                  on_query=advance)


def _choose_labelling(context: SearchContext, data: BeirDataset, own: bool,
                      corpus_vectors: bool | None, pairs: Callable[[], int]) -> None:
    """Label by corpus vectors when asked, or (`corpus_vectors` None) when they cost less
    than the run's expected `pairs`; never on the team's own index, whose docs the
    dataset need not hold."""
    if corpus_vectors is None:
        corpus_vectors = not own and _corpus_vectors_pay(context.labeler, data, pairs())
    if corpus_vectors:
        context.labeler = _corpus_labeler(context.labeler, data)


def _corpus_vectors_pay(labeler: Labeler, data: BeirDataset, pairs: int) -> bool:
    """Whether corpus vectors cost less than labelling live (`corpus_vectors_pay`), said in
    one line; only dual encoders have them (an ensemble's members all), and a run that
    labels nothing needs neither."""
    members = vector_labelers(labeler)
    if not _all_dual(labeler) or pairs == 0:
        return False
    texts = [doc.contents for doc in data.corpus()]
    cached = all(has_corpus_embeddings(member.encoder, data.root / "corpus.jsonl", texts)
                 for member in members)
    chosen = corpus_vectors_pay(pairs, len(texts), cached)
    err_console.print(corpus_vectors_line(chosen, cached, pairs, len(texts)))
    return chosen


def _all_dual(labeler: Labeler) -> bool:
    """Whether every model of `labeler` is a dual encoder (has doc vectors to cache)."""
    members = labeler.members if isinstance(labeler, EnsembleLabeler) else (labeler,)
    return len(vector_labelers(labeler)) == len(members)


def corpus_vectors_line(chosen: bool, cached: bool, pairs: int, docs: int) -> str:
    """What `_corpus_vectors_pay` chose, and why, in one line."""
    if not chosen:
        return (f"labelling by encoding each labelled doc: about {pairs:,} pairs, fewer than "
                f"half the corpus's {docs:,} docs (--corpus-vectors encodes the corpus "
                "instead; the same φ)")
    why = ("cached for this corpus" if cached else
           f"about {pairs:,} pairs to label, at least half the {docs:,} docs encoded once")
    return (f"labelling by corpus vectors ({why}): the same φ as encoding each labelled "
            "doc (--no-corpus-vectors)")


def _corpus_labeler(labeler: Labeler, data: BeirDataset) -> Labeler:
    """The same dual-encoder φ over doc vectors computed once per collection and cached
    in the model cache: each later pair is a dot product."""
    from es_tour.agents import corpus_labeler

    if not _all_dual(labeler):
        raise ConfigError(f"--corpus-vectors needs dual-encoder labelers; [{labeler.name}] "
                          "scores (query, doc) pairs jointly")
    return corpus_labeler(labeler, data)
