"""`es-tour train-labeler`: tune a dual-encoder labeler's query tower on judged queries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from es_tour.cli._app import app
from es_tour.cli._errors import clean_errors
from es_tour.cli._shared import Dataset, console
from es_tour.training._query_tower import QueryTowerOptions

_DEFAULTS = QueryTowerOptions()


@app.command("train-labeler")
@clean_errors
def train_labeler_command(
    dataset: Dataset,
    split: Annotated[str, typer.Option(help="judged split to train on (never test)")] = "train",
    base: Annotated[str, typer.Option(
        help="the dual-encoder labeler to tune: a registry name or model directory")
    ] = "default",
    out: Annotated[Path | None, typer.Option(
        help="directory to write (default: <models>/<base>-<dataset>-queries)")] = None,
    epochs: Annotated[int, typer.Option(min=1)] = _DEFAULTS.epochs,
    held_out: Annotated[int, typer.Option(
        help="the split's first N judged queries: measured after each epoch, never trained "
             "on; the best epoch is kept", min=1)] = _DEFAULTS.held_out,
    learning_rate: float = _DEFAULTS.learning_rate,
    temperature: Annotated[float, typer.Option(
        help="τ of the softmax over the corpus")] = _DEFAULTS.temperature,
    teacher_weight: Annotated[float, typer.Option(
        help="weight of KL to the base tower's softmax (keeps unjudged docs in place)")
    ] = _DEFAULTS.teacher_weight,
    seed: int = _DEFAULTS.seed,
) -> None:
    """Tune the labeler's query tower on a split's judgements against its own doc vectors,
    which stay as they are: no doc is re-embedded, and the tuned labeler reads the vectors
    the base one stored. Name the directory written in index.tour.labeler."""
    from es_tour.datasets import BeirDataset
    from es_tour.models._labelers import model_directory
    from es_tour.paths import models_dir
    from es_tour.training._query_tower import tune_query_tower
    from es_tour.training._reranker import check_training_split

    check_training_split(split)
    options = QueryTowerOptions(epochs=epochs, learning_rate=learning_rate,
                                temperature=temperature, teacher_weight=teacher_weight,
                                held_out=held_out, seed=seed)
    data = BeirDataset(dataset).split(split)
    base_name = model_directory(base)[1] or Path(base).name
    out = out or models_dir() / f"{base_name}-{dataset.name}-queries"
    with console.status(f"tuning {base_name}'s query tower on {dataset.name} {split}"):
        tuned = tune_query_tower(base, data, out, options)
    figures = ", ".join(f"{v:.4f}" for v in tuned.epoch_ndcg)
    console.print(
        f"wrote {out} in {tuned.seconds:.0f}s: {tuned.trained_queries} queries trained on; "
        f"held-out nDCG@10 (exact, {tuned.held_out_queries} queries) base "
        f"{tuned.base_ndcg:.4f}, per epoch {figures}; kept epoch {tuned.chosen_epoch}")
