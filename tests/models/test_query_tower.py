"""Query-tower tuning: a few real epochs of bge-small on SciFact judgements, exported to a
model directory whose doc tower (and so its stored vectors) is the base model's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from es_tour.datasets import BeirSplit
from es_tour.errors import ConfigError, ModelError
from es_tour.models import DualEncoder, DualEncoderLabeler, load_labeler
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.models._manifest import read_manifest
from es_tour.pipeline._vector_store import store_index
from es_tour.training._corpus import exact_search
from es_tour.training._query_tower import (
    FOLDS,
    TRAINING_FILE,
    QueryTowerOptions,
    TunedTower,
    check_options,
    train_parts,
    tune_query_tower,
    tuning_steps,
)

QUICK = QueryTowerOptions(epochs=2, learning_rate=1e-4, folds=2, batch_queries=4)
# A judged set a tower can learn in seconds: questions about bones that all call one doc,
# which an untuned labeler does not rank first, relevant. Folds of it resemble each other,
# so what a fold's tower learns from the others shows on its held-out questions.
TEXTS = ["Vitamin D supplements and fracture risk in older adults.",
         "Bone mineral density after vitamin D and calcium therapy.",
         "Sunlight exposure, vitamin D levels and mood.",
         "Calcium intake and kidney stones.",
         "Osteoporosis treatment with bisphosphonates.",
         "Vitamin D receptor expression in immune cells.",
         "Hip fractures in nursing homes: a cohort study.",
         "Dietary sources of vitamin D in northern countries."]
TAUGHT = "3"
QUESTIONS = ["does vitamin D protect bones", "vitamin D and bone health",
             "bone strength and vitamin D", "can vitamin D prevent weak bones",
             "vitamin D for healthy bones", "bones and vitamin D intake",
             "does vitamin D make bones stronger", "vitamin D effect on the skeleton",
             "vitamin D and brittle bones"]


def bones_split(root: Path, questions: list[str] = QUESTIONS) -> BeirSplit:
    """TEXTS as a corpus under `root`, `questions` each judging TAUGHT relevant."""
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "title": "", "text": text}) + "\n"
                              for i, text in enumerate(TEXTS)))
    ids = [f"q{i}" for i in range(len(questions))]
    return BeirSplit(corpus_path=corpus, doc_ids=[str(i) for i in range(len(TEXTS))],
                     doc_texts=list(TEXTS), query_ids=ids, query_texts=list(questions),
                     qrels={q: {TAUGHT: 1} for q in ids})


@pytest.fixture(scope="module")
def small_train(bones_tower) -> BeirSplit:
    return bones_tower[0]


@pytest.fixture(scope="module")
def tuned(bones_tower) -> tuple[TunedTower, Path]:
    """The session's tower (the root conftest's `bones_tower`), tuned on `small_train`."""
    _, result, out, _ = bones_tower
    return result, out


def judged_ranks(encoder: DualEncoder, split, rows: list[int]) -> float:
    """Mean rank (1 is best) of each trained query's judged docs over the small corpus."""
    docs = encoder.encode_docs(split.doc_texts)
    queries = encoder.encode_queries([split.query_texts[i] for i in rows])
    ranked, _ = exact_search(queries, docs, k=len(split.doc_ids))
    ranks = []
    for i, order in zip(rows, ranked, strict=True):
        position = {split.doc_ids[r]: n + 1 for n, r in enumerate(order)}
        ranks += [position[d] for d in split.qrels[split.query_ids[i]]]
    return float(np.mean(ranks))


def test_tuning_moves_the_judged_docs_up_for_the_queries_it_trained_on(
        tuned, small_train, default_labeler_dir: Path):
    result, out = tuned
    every = list(range(len(small_train.query_ids)))
    base = DualEncoder(default_labeler_dir, "int8")
    mine = DualEncoder(out, "int8")
    assert result.trained == small_train.query_ids and result.chosen_epoch > 0
    assert judged_ranks(mine, small_train, every) < judged_ranks(base, small_train, every)


def test_the_steps_a_tuning_takes_are_known_before_it_starts(bones_tower) -> None:
    split, tuned, _, steps = bones_tower
    # 9 questions, 2 folds of 4 and 5, batches of 4: the fold towers 2 and 1 steps an
    # epoch, the whole split's 3, each for QUICK's 2 epochs at most
    assert tuning_steps(len(split.query_ids), QUICK) == 12
    whole = 3 * tuned.chosen_epoch  # the whole split's tower takes the folds' choice
    assert steps == 2 * QUICK.epochs + 1 * QUICK.epochs + whole


def test_each_fold_tower_held_out_its_fold_and_trained_on_the_rest(tuned, small_train):
    result, out = tuned
    assert len(result.folds) == QUICK.folds
    held = [q for fold in result.folds for q in fold.held_out]
    assert sorted(held) == sorted(small_train.query_ids)  # each query held out exactly once
    for k, fold in enumerate(result.folds):
        assert set(fold.trained) == set(small_train.query_ids) - set(fold.held_out)
        assert len(fold.epoch_ndcg) == QUICK.epochs and fold.path == out / FOLDS / str(k)
        assert read_manifest(fold.path).docs_from == "bge-small-en-v1.5"
    base, cross_fitted = result.cross_fitted()
    assert 0 < base <= 1 and 0 < cross_fitted <= 1
    # what the frontier fits this labeler with: each train query by its fold's tower
    parts = train_parts(str(out), small_train.query_ids)
    assert [(Path(p), qs) for p, qs in parts] == [(f.path, f.held_out) for f in result.folds]
    assert train_parts("default", ["1", "2"]) == [("default", ["1", "2"])]
    assert train_parts("bge-small-en-v1.5+e5-small-v2", ["1"]) == [
        ("bge-small-en-v1.5+e5-small-v2", ["1"])]
    with pytest.raises(ConfigError, match="no fold held out"):
        train_parts(str(out), ["not-a-train-query"])


def test_the_tuned_labeler_embeds_docs_as_its_base_does_and_queries_otherwise(
        tuned, small_train, default_labeler_dir: Path):
    _, out = tuned
    base, mine = DualEncoder(default_labeler_dir, "int8"), DualEncoder(out, "int8")
    texts = small_train.doc_texts
    assert np.array_equal(mine.encode_docs(texts), base.encode_docs(texts))
    assert mine.doc_encoding == base.doc_encoding
    queries = small_train.query_texts
    cosines = (mine.encode_queries(queries) * base.encode_queries(queries)).sum(axis=1)
    assert cosines.min() < 0.9999


def test_the_tuned_labeler_reads_the_store_and_precision_of_its_base(
        tuned, default_labeler_dir: Path):
    _, out = tuned
    assert labeler_precision(str(out)) == labeler_precision("default") == "int8"
    mine = load_labeler(str(out))
    base = load_labeler("default")
    assert isinstance(mine, DualEncoderLabeler) and isinstance(base, DualEncoderLabeler)
    assert store_index(mine) == store_index(base)


def test_the_directory_records_how_it_was_tuned_and_the_query_graphs_parity(tuned):
    result, out = tuned
    manifest = read_manifest(out)
    assert manifest.docs_from == "bge-small-en-v1.5"
    assert set(manifest.query_models) == set(manifest.models)
    assert all(p["query_cosine_min"] > 0.98 for p in manifest.parity.values())
    facts = json.loads((out / TRAINING_FILE).read_text())
    assert facts["chosen_epoch"] == result.chosen_epoch
    assert [fold["held_out"] for fold in facts["folds"]] == [
        fold.held_out for fold in result.folds]


def test_a_model_in_the_cache_is_named_by_its_directory(tuned, monkeypatch, tmp_path: Path):
    _, out = tuned
    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine").symlink_to(out, target_is_directory=True)
    assert model_directory("mine") == (tmp_path / "models" / "mine", None)
    with pytest.raises(ConfigError, match="unknown model"):
        model_directory("nothing-here")


def test_a_tuned_tower_is_not_tuned_again_and_options_are_checked(tuned, small_train,
                                                                   tmp_path: Path):
    _, out = tuned
    with pytest.raises(ConfigError, match="tuned query tower already"):
        tune_query_tower(str(out), small_train, tmp_path / "again", QUICK)
    with pytest.raises(ConfigError, match="folds"):
        check_options(replace(QUICK, folds=5), 4)
    with pytest.raises(ConfigError):
        check_options(replace(QUICK, temperature=0), 100)


def test_query_models_must_cover_the_models_precisions(tuned, tmp_path: Path):
    _, out = tuned
    raw = json.loads((out / "manifest.json").read_text())
    raw["query_models"] = {"fp32": "query.onnx"}
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ModelError, match="query_models must map"):
        read_manifest(tmp_path)
