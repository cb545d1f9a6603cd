"""`es-tour export`, `es-tour train-reranker` and `es-tour models build|list|evaluate|rerank`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from es_tour.cli._app import app
from es_tour.cli._checks import (
    CaCerts,
    ClientCert,
    ClientKey,
    EngineTarget,
    VerifyCerts,
    engine_target,
)
from es_tour.cli._errors import clean_errors
from es_tour.errors import ConfigError
from es_tour.training._reranker import DEFAULT_BASE, TrainOptions

if TYPE_CHECKING:
    from es_tour.models import DualEncoder

models_app = typer.Typer(no_args_is_help=True, help="Build, list and evaluate registry models.")
app.add_typer(models_app, name="models")


@app.command("export")
@clean_errors
def export(
    model: Annotated[str, typer.Option(help="Hugging Face model directory or hub id.")],
    kind: Annotated[str, typer.Option(help="dual or cross.")],
    out: Annotated[Path, typer.Option(help="Directory to write.")],
    int8: Annotated[bool, typer.Option("--int8", help="Also write model.int8.onnx.")] = False,
    max_length: Annotated[int, typer.Option(help="Tokens kept per input.")] = 256,
    pooling: Annotated[str, typer.Option(help="dual only: mean or cls.")] = "mean",
    normalize: Annotated[bool, typer.Option(help="dual only: L2-normalise.")] = True,
    query_prefix: Annotated[str, typer.Option(help="dual only.")] = "",
    doc_prefix: Annotated[str, typer.Option(help="dual only.")] = "",
) -> None:
    """Export a model to ONNX with its tokenizer and a parity-checked manifest.json."""
    from es_tour.training import export_model

    manifest = export_model(
        model, kind, out, int8=int8, max_length=max_length, pooling=pooling,
        normalize=normalize, query_prefix=query_prefix, doc_prefix=doc_prefix,
    )
    typer.echo(f"wrote {out} ({', '.join(sorted(manifest.models))})")
    for precision, figures in manifest.parity.items():
        typer.echo(f"  parity {precision}: {figures}")


@models_app.command("build")
@clean_errors
def build(
    names: Annotated[list[str] | None, typer.Argument(help="Registry names; default: all.")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even when up to date.")] = False,
) -> None:
    """Build registry models into the model cache (skips intact, up-to-date ones)."""
    from es_tour.training import build as build_one
    from onnx_models import MODELS

    for name in names or list(MODELS):
        done = build_one(name, force)
        state = f"built in {done.seconds:.0f}s" if done.rebuilt else "up to date"
        typer.echo(f"{done.name}: {state} -> {done.path}")


@models_app.command("embed")
@clean_errors
def embed(
    name: Annotated[str, typer.Argument(
        help="A dual model: a registry name or alias, or a model directory.")],
    dataset: Annotated[Path, typer.Option(help="BEIR dataset directory.")],
) -> None:
    """Embed a dataset's corpus with a dual model into the model cache, where `es-tour
    index`, `demo` and `eval` read it rather than embed it again: on every core, with no
    engine (on a bigger machine than the one that indexes, say). Nothing to do when it is
    cached."""
    from es_tour.datasets import BeirDataset
    from es_tour.models import corpus_embeddings, has_corpus_embeddings, query_encoder

    data = BeirDataset(dataset)
    encoder = query_encoder(name)  # the docs' encoding `es-tour index` looks up
    corpus, texts = data.root / "corpus.jsonl", [doc.contents for doc in data.corpus()]
    if has_corpus_embeddings(encoder, corpus, texts):
        typer.echo(f"{name}: the {len(texts)} docs of {data.name} are embedded already")
        return
    _, rate = corpus_embeddings(encoder, corpus, texts)
    typer.echo(f"{name}: embedded the {len(texts)} docs of {data.name} ({rate:.1f} docs/s) "
               f"into {encoder.path}")


@models_app.command("list")
@clean_errors
def list_models() -> None:
    """Registry models, their role, source and whether they are built."""
    from es_tour.models import model_path
    from es_tour.training._build import is_current
    from onnx_models import ALIASES, MODELS

    roles: dict[str, list[str]] = {}
    for alias, target in ALIASES.items():
        roles.setdefault(target, []).append(alias)
    for name, recipe in MODELS.items():
        built = "built" if is_current(recipe) else "not built"
        role = f" [{', '.join(roles[name])}]" if name in roles else ""
        typer.echo(f"{name}{role}: {recipe.kind}, {built}, {model_path(name)}")
        typer.echo(f"    {recipe.summary}; from {recipe.source.describe()}")


@models_app.command("evaluate")
@clean_errors
def evaluate(
    dataset: Annotated[Path, typer.Option(help="BEIR dataset directory.")],
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Registry names or model directories (a name in the model cache "
                            "too); default: every registry dual model built here."),
    ] = None,
    split: Annotated[str, typer.Option(help="train, dev or test.")] = "train",
    precision: Annotated[str, typer.Option(help="fp32 or int8.")] = "fp32",
    threads: Annotated[int | None, typer.Option(help="onnxruntime threads.")] = None,
    query_prefix: Annotated[
        str | None, typer.Option(help="Replace the manifest's query prefix (ablation).")
    ] = None,
    apart_from: Annotated[str | None, typer.Option(
        help="Also score apart the queries with a judged doc judged in this split, and the "
             "others: what a model tuned on that split can have memorised.")] = None,
) -> None:
    """nDCG@10 of each dual model alone: exact dense search over the whole corpus in
    memory, with no engine and no search method, one line per model. (`es-tour eval`
    scores search methods through the engine.)"""
    from es_tour.datasets import BeirDataset
    from es_tour.models import DualEncoder, model_path
    from es_tour.models._labelers import model_directory
    from es_tour.training import evaluate_encoder
    from es_tour.training._corpus import judged_apart
    from onnx_models import MODELS

    dataset_dir = BeirDataset(dataset)
    data = dataset_dir.split(split)
    groups = (judged_apart(data.query_ids, data.qrels, dataset_dir.qrels(apart_from))
              if apart_from else None)
    # by default the dual models built here; a named one must be known and built, checked
    # before the first model spends minutes on the corpus
    names = names or [s.name for s in MODELS.values()
                      if s.kind == "dual" and model_path(s.name).is_dir()]
    paths = {name: model_directory(name)[0] for name in names}
    unbuilt = [name for name, path in paths.items() if not path.is_dir()]
    if unbuilt:
        raise ConfigError(f"models {unbuilt} are not built; `es-tour models build NAME` "
                          "builds one")
    extra = [f"{name} ({apart_from})" for name in groups or {}]
    typer.echo("| model | split | precision | nDCG@10 | queries | docs/s |"
               + "".join(f" {e} |" for e in extra))
    typer.echo("|---|---|---|---|---|---|" + "---|" * len(extra))
    for name, path in paths.items():
        encoder = DualEncoder(path, precision, threads, query_prefix=query_prefix)
        label = name if query_prefix is None else f"{name} (query prefix {query_prefix!r})"
        result = evaluate_encoder(encoder, data, split, label, groups)
        typer.echo(
            f"| {result.model} | {result.split} | {result.precision} | "
            f"{result.ndcg_at_10:.4f} | {result.queries} | {result.docs_per_s:.1f} |"
            + "".join(f" {ndcg:.4f} ({n} q) |" for ndcg, n in result.groups.values())
        )


Dataset = Annotated[Path, typer.Option(help="BEIR dataset directory.")]
Engine = Annotated[str, typer.Option(help="opensearch or elasticsearch.")]
Url = Annotated[str | None, typer.Option(help="Engine URL (default: the local node's).")]
Index = Annotated[str | None, typer.Option(help="Index name (default: the dataset's name).")]
_TRAINING = TrainOptions()  # the defaults of the options below


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn())


def _mine(
    target: EngineTarget,
    index: str,
    queries: Mapping[str, str],
    depth: int,
    retriever: DualEncoder | None,
    progress: Progress,
) -> dict[str, list[str]]:
    """Candidates of `queries` from the engine's index, built by `es-tour index`."""
    from es_tour.training._mining import mine_candidates

    async def run() -> dict[str, list[str]]:
        async with target.connect() as adapter:
            try:
                await adapter.count(index)
            except Exception as exc:  # the clients raise their own connection/404 types
                raise ConfigError(
                    f"cannot read index [{index}] at {target.url} ({type(exc).__name__}); start "
                    "the engine (`es-tour engine start`) and index the dataset (`es-tour index`)"
                ) from exc
            return await mine_candidates(adapter, index, queries, depth, retriever, progress)

    return asyncio.run(run())


@app.command("train-reranker")
@clean_errors
def train_reranker(
    dataset: Dataset,
    split: Annotated[str, typer.Option(help="Judged split to train on (never test).")] = "train",
    base: Annotated[
        str, typer.Option(help="HF checkpoint directory or registry name with PyTorch weights.")
    ] = DEFAULT_BASE,
    out: Annotated[
        Path | None, typer.Option(help="Directory to write (default: <models>/<dataset>-reranker).")
    ] = None,
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    depth: Annotated[int, typer.Option(help="BM25 and kNN hits mined per query.")] = 30,
    knn: Annotated[bool, typer.Option(help="Mine kNN hits too, not only BM25.")] = True,
    teacher: Annotated[
        str, typer.Option(help="Registry name or model directory; 'none' to use judgements only.")
    ] = "default",
    minutes: Annotated[
        float, typer.Option(help="Budget of the training loop.")
    ] = _TRAINING.minutes,
    steps: Annotated[
        int | None, typer.Option(help="Planned steps (default: what fits in --minutes).")
    ] = None,
    seed: int = _TRAINING.seed,
    negatives: Annotated[int, typer.Option(help="Negatives per positive.")] = _TRAINING.negatives,
    max_length: Annotated[
        int, typer.Option(help="Tokens per (query, doc) pair.")
    ] = _TRAINING.max_length,
    learning_rate: Annotated[
        float, typer.Option(help="The encoder's peak learning rate.")
    ] = _TRAINING.learning_rate,
    head_learning_rate: Annotated[
        float, typer.Option(help="The new head's peak learning rate.")
    ] = _TRAINING.head_learning_rate,
    teacher_weight: Annotated[
        float, typer.Option(help="Share of the teacher's KL term.")
    ] = _TRAINING.teacher_weight,
    validation_queries: Annotated[
        int, typer.Option(help="Train queries held out.")
    ] = _TRAINING.validation_queries,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Fine-tune a cross-encoder reranker on a split's judgements, with hard negatives from
    the engine and the default labeler as teacher; writes a cross model directory."""
    from es_tour.datasets import BeirDataset
    from es_tour.models import query_encoder
    from es_tour.paths import models_dir
    from es_tour.training._reranker import check_training_split
    from es_tour.training._reranker import train_reranker as train

    options = TrainOptions(
        minutes=minutes, steps=steps, seed=seed, negatives=negatives, max_length=max_length,
        learning_rate=learning_rate, head_learning_rate=head_learning_rate,
        teacher_weight=teacher_weight,
        validation_queries=validation_queries,
    )
    check_training_split(split)
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    data = BeirDataset(dataset).split(split)
    index = index or dataset.name
    out = out or models_dir() / f"{dataset.name}-reranker"
    retriever = query_encoder("retriever") if knn else None
    with _progress() as progress:
        started = time.perf_counter()
        candidates = _mine(
            target, index, dict(zip(data.query_ids, data.query_texts, strict=True)),
            depth, retriever, progress,
        )
        mined = {"engine": engine, "index": index, "depth": depth,
                 "first_stages": ["bm25", "knn"] if knn else ["bm25"],
                 "seconds": round(time.perf_counter() - started, 1)}
        trained = train(
            data, split, candidates, out, options, base,
            teacher=None if teacher == "none" else teacher, notes={"candidates": mined},
            progress=progress,
        )
    typer.echo(
        f"wrote {out}: {trained.fitted.steps} steps ({trained.fitted.stopped_by}), "
        f"{trained.groups} groups from {trained.train_queries} queries, "
        f"{trained.fitted.seconds:.0f}s training, {time.perf_counter() - started:.0f}s in all"
    )
    typer.echo(f"  held-out validation: {trained.validation}")


@models_app.command("rerank")
@clean_errors
def rerank(
    dataset: Dataset,
    names: Annotated[list[str], typer.Argument(help="Registry names or model directories.")],
    split: Annotated[str, typer.Option(help="train, dev or test.")] = "test",
    depth: Annotated[int, typer.Option(help="BM25 hits reranked per query.")] = 100,
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    precision: Annotated[
        str | None, typer.Option(help="fp32 or int8 (default: each model's labeler precision).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="onnxruntime threads.")] = None,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """nDCG@10 of reranking the engine's BM25 top-DEPTH with each model, one line per model.

    Dual models score by cosine over their cached corpus vectors (encoded once, cached).
    """
    from es_tour.datasets import BeirDataset
    from es_tour.models._labelers import labeler_precision
    from es_tour.training._mining import first_stage_ndcg, model_scorer, rerank_ndcg

    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)
    data = BeirDataset(dataset).split(split)
    queries = dict(zip(data.query_ids, data.query_texts, strict=True))
    rows = []
    with _progress() as progress:
        candidates = _mine(target, index or dataset.name, queries, depth, None, progress)
        rows.append(("bm25 (no reranking)", "-", first_stage_ndcg(data, candidates), 0.0))
        for name in names:
            started = time.perf_counter()
            chosen = precision or labeler_precision(name)
            scorer = model_scorer(name, data, chosen, threads, encode_corpus=True)
            ndcg = rerank_ndcg(data, candidates, scorer, progress, f"reranking with {name}")
            rows.append((name, chosen, ndcg, time.perf_counter() - started))
    typer.echo(f"| model | precision | nDCG@10, BM25 top-{depth} of {split} | seconds |")
    typer.echo("|---|---|---|---|")
    for name, chosen, ndcg, seconds in rows:
        typer.echo(f"| {name} | {chosen} | {ndcg:.4f} | {seconds:.0f} |")
