"""`es-tour export` and `es-tour models build|list|evaluate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from es_tour.cli import app
from es_tour.cli._errors import clean_errors

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
    from es_tour.models import export_model

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
    from es_tour.models import build as build_one
    from onnx_models import MODELS

    for name in names or list(MODELS):
        done = build_one(name, force)
        state = f"built in {done.seconds:.0f}s" if done.rebuilt else "up to date"
        typer.echo(f"{done.name}: {state} -> {done.path}")


@models_app.command("list")
@clean_errors
def list_models() -> None:
    """Registry models, their role, source and whether they are built."""
    from es_tour.models import model_path
    from es_tour.models._build import is_current
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
        list[str] | None, typer.Argument(help="Registry names; default: all dual models.")
    ] = None,
    split: Annotated[str, typer.Option(help="train, dev or test.")] = "train",
    precision: Annotated[str, typer.Option(help="fp32 or int8.")] = "fp32",
    threads: Annotated[int | None, typer.Option(help="onnxruntime threads.")] = None,
    query_prefix: Annotated[
        str | None, typer.Option(help="Replace the manifest's query prefix (ablation).")
    ] = None,
) -> None:
    """nDCG@10 of exact dense search over the whole corpus, one line per model."""
    from es_tour.models import DualEncoder, evaluate, load_beir, model_path
    from onnx_models import MODELS, spec

    data = load_beir(dataset, split)
    chosen = names or [n for n, s in MODELS.items() if s.kind == "dual"]
    typer.echo("| model | split | precision | nDCG@10 | queries | docs/s |")
    typer.echo("|---|---|---|---|---|---|")
    for name in chosen:
        recipe = spec(name)
        encoder = DualEncoder(
            model_path(recipe.name), precision, threads, query_prefix=query_prefix
        )
        label = recipe.name if query_prefix is None else (
            f"{recipe.name} (query prefix {query_prefix!r})"
        )
        result = evaluate(encoder, data, split, label)
        typer.echo(
            f"| {result.model} | {result.split} | {result.precision} | "
            f"{result.ndcg_at_10:.4f} | {result.queries} | {result.docs_per_s:.1f} |"
        )
