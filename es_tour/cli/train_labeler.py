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
    epochs: Annotated[int, typer.Option(
        help="epochs a fold's tower may take (its best on its held-out fold is kept)", min=1)
    ] = _DEFAULTS.epochs,
    folds: Annotated[int, typer.Option(
        help="contiguous folds of the judged queries: a tower per fold is tuned on the others "
             "and chooses its epochs on it; the exported tower takes the folds' choice",
        min=2)] = _DEFAULTS.folds,
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
                                folds=folds, seed=seed)
    data = BeirDataset(dataset).split(split)
    base_name = model_directory(base)[1] or Path(base).name
    out = out or models_dir() / f"{base_name}-{dataset.name}-queries"
    with console.status(f"tuning {base_name}'s query tower on {dataset.name} {split}"):
        tuned = tune_query_tower(base, data, out, options)
    base_ndcg, tuned_ndcg = tuned.cross_fitted()
    console.print(f"wrote {out} in {tuned.seconds:.0f}s: {len(tuned.trained)} queries, "
                  f"{tuned.chosen_epoch} epochs (the folds' choice)")
    for k, fold in enumerate(tuned.folds):
        figures = ", ".join(f"{v:.4f}" for v in fold.epoch_ndcg)
        console.print(f"  fold {k}: {len(fold.held_out)} queries held out, exact nDCG@10 "
                      f"base {fold.base_ndcg:.4f}, per epoch {figures}; kept epoch "
                      f"{fold.chosen_epoch}")
    console.print(f"  cross-fitted exact nDCG@10 on {len(tuned.trained)} train queries, each "
                  f"by the tower that never trained on it: {base_ndcg:.4f} -> {tuned_ndcg:.4f}")
