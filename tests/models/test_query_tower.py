"""Query-tower tuning: a few real epochs of bge-small on SciFact judgements, exported to a
model directory whose doc tower (and so its stored vectors) is the base model's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError, ModelError
from es_tour.models import DualEncoder, DualEncoderLabeler, load_labeler
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.models._manifest import read_manifest
from es_tour.pipeline._vector_store import store_index
from es_tour.training._corpus import exact_search
from es_tour.training._query_tower import (
    TRAINING_FILE,
    QueryTowerOptions,
    check_options,
    held_out_queries,
    tune_query_tower,
)

DOCS = 150  # a corpus small enough to embed on a CI machine in seconds
QUICK = QueryTowerOptions(epochs=3, learning_rate=1e-4, held_out=3, batch_queries=8)


@pytest.fixture(scope="module")
def small_train(scifact: Path):
    """SciFact train cut to its first DOCS docs and the queries judged among them."""
    data = BeirDataset(scifact).split("train")
    docs = set(data.doc_ids[:DOCS])
    qrels = {q: {d: g for d, g in judged.items() if d in docs}
             for q, judged in data.qrels.items()}
    keep = [i for i, q in enumerate(data.query_ids) if qrels.get(q)]
    return replace(data, doc_ids=data.doc_ids[:DOCS], doc_texts=data.doc_texts[:DOCS],
                   query_ids=[data.query_ids[i] for i in keep],
                   query_texts=[data.query_texts[i] for i in keep],
                   qrels={data.query_ids[i]: qrels[data.query_ids[i]] for i in keep})


@pytest.fixture(scope="module")
def tuned(small_train, default_labeler_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("tuned") / "bge-queries"
    return tune_query_tower("default", small_train, out, QUICK), out


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
    trained = list(range(QUICK.held_out, len(small_train.query_ids)))
    base = DualEncoder(default_labeler_dir, "int8")
    mine = DualEncoder(out, "int8")
    assert result.trained_queries == len(trained)
    assert judged_ranks(mine, small_train, trained) < judged_ranks(base, small_train, trained)


def test_the_tuned_labeler_embeds_docs_as_its_base_does_and_queries_otherwise(
        tuned, small_train, default_labeler_dir: Path):
    _, out = tuned
    base, mine = DualEncoder(default_labeler_dir, "int8"), DualEncoder(out, "int8")
    texts = small_train.doc_texts[:4]
    assert np.array_equal(mine.encode_docs(texts), base.encode_docs(texts))
    assert mine.doc_encoding == base.doc_encoding
    queries = small_train.query_texts[:4]
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
    assert len(facts["epoch_ndcg"]) == QUICK.epochs
    assert facts["chosen_epoch"] == result.chosen_epoch
    assert 0 <= result.chosen_epoch <= QUICK.epochs
    # what the frontier fits this labeler on: only the train queries it never trained on
    assert held_out_queries(str(out)) == QUICK.held_out
    assert held_out_queries("default") is None
    assert held_out_queries("bge-small-en-v1.5+e5-small-v2") is None


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
    with pytest.raises(ConfigError, match="must leave train queries"):
        check_options(QUICK, QUICK.held_out)
    with pytest.raises(ConfigError):
        check_options(replace(QUICK, temperature=0), 100)


def test_query_models_must_cover_the_models_precisions(tuned, tmp_path: Path):
    _, out = tuned
    raw = json.loads((out / "manifest.json").read_text())
    raw["query_models"] = {"fp32": "query.onnx"}
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ModelError, match="query_models must map"):
        read_manifest(tmp_path)
