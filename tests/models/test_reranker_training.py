"""Reranker fine-tuning: the loss, the data split, and a few real steps exported to ONNX."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from es_tour.bench import models as bench_models
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError, ModelError
from es_tour.models import (
    CrossEncoder,
    CrossEncoderLabeler,
    load_labeler,
)
from es_tour.training._parity import spearman
from es_tour.training._reranker import (
    PYTORCH_DIR,
    TrainOptions,
    check_training_split,
    export_reranker,
    fit,
    listwise_loss,
    split_queries,
    training_groups,
)

TINY = TrainOptions(steps=3, warmup_steps=1, negatives=3, groups_per_step=2, max_length=64,
                    learning_rate=1e-4, validation_queries=2)


@pytest.fixture(scope="module")
def train_split(scifact: Path):
    """Ten SciFact train queries, with in-memory candidates: seeded random corpus docs."""
    data = BeirDataset(scifact).split("train")
    ids = data.query_ids[:10]
    texts = dict(zip(data.query_ids, data.query_texts, strict=True))
    small = replace(data, query_ids=ids, query_texts=[texts[q] for q in ids],
                    qrels={q: data.qrels[q] for q in ids})
    rng = random.Random(0)
    candidates = {q: rng.sample(data.doc_ids, 8) for q in ids}
    return small, candidates


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory, train_split, tiny_cross_hf) -> Path:
    """A few steps on the tiny random BERT (fast in CI), exported as `train-reranker` writes
    it; the real run's directory is checked below when it is built."""
    data, candidates = train_split
    groups = training_groups(data, data.query_ids, candidates, TINY.negatives, TINY.seed)
    texts = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    model, tokenizer, fitted = fit(groups, texts, tiny_cross_hf, TINY)
    assert fitted.steps == 3 and fitted.stopped_by == "steps"
    out = tmp_path_factory.mktemp("reranker")
    export_reranker(model, tokenizer, out, TINY.max_length, "test")
    return out


def _assert_onnx_matches_pytorch(directory: Path, pairs: list[tuple[str, str]]) -> None:
    """The ONNX fp32 scores against the PyTorch checkpoint kept in `directory`."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    checkpoint = directory / PYTORCH_DIR
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).eval()
    encoder = CrossEncoder(directory)
    with torch.no_grad():
        encoded = tokenizer([q for q, _ in pairs], [d for _, d in pairs], padding=True,
                            truncation=True, max_length=encoder.manifest.max_length,
                            return_tensors="pt")
        reference = model(**encoded).logits[:, 0].numpy()
    onnx = encoder.predict(pairs)
    assert np.abs(onnx - reference).max() < 1e-4
    assert spearman(onnx, reference) >= 0.99


def test_listwise_loss_is_cross_entropy_and_kl_to_the_teacher():
    import torch

    scores = torch.tensor([[2.0, 0.0, -1.0]])
    ce = -torch.log_softmax(scores, dim=1)[0, 0]
    assert float(listwise_loss(torch, scores, None, 0.5, 0.1)) == pytest.approx(float(ce))
    teacher = scores * 0.1  # softmax(teacher / 0.1) is the student's own distribution
    assert float(listwise_loss(torch, scores, teacher, 1.0, 0.1)) == pytest.approx(0, abs=1e-6)


def test_groups_hold_a_judged_positive_then_unjudged_negatives(train_split):
    data, candidates = train_split
    groups = training_groups(data, data.query_ids, candidates, 3, seed=0)
    assert groups
    for group in groups:
        positive, *negatives = group.doc_ids
        assert data.qrels[group.query_id][positive] > 0
        assert len(negatives) == 3 and not set(negatives) & set(data.qrels[group.query_id])
    assert groups == training_groups(data, data.query_ids, candidates, 3, seed=0)


def test_held_out_queries_are_seeded_and_disjoint():
    ids = [str(i) for i in range(20)]
    train, held_out = split_queries(ids, 5, seed=1)
    assert len(held_out) == 5 and not set(train) & set(held_out)
    assert sorted(train + held_out) == sorted(ids)
    assert (train, held_out) == split_queries(ids, 5, seed=1)


def test_the_test_split_is_refused():
    with pytest.raises(ConfigError, match="test stays unseen"):
        check_training_split("test")


def test_fine_tuned_reranker_onnx_matches_pytorch(fine_tuned, scifact_docs, scifact_queries):
    pairs = [(q, d) for q in scifact_queries[:4] for _, d in scifact_docs[:8]]
    _assert_onnx_matches_pytorch(fine_tuned, pairs)


def test_fine_tuned_reranker_loads_as_a_labeler_by_path(fine_tuned):
    out = fine_tuned
    labeler = load_labeler(str(out))
    assert isinstance(labeler, CrossEncoderLabeler) and labeler.name == out.name
    assert labeler.score("vitamin d", [("1", "Vitamin D and bone fractures.")]).shape == (1,)


def test_scoring_with_the_fine_tuned_labeler_does_not_import_torch(fine_tuned):
    out = fine_tuned
    script = (
        "import sys\n"
        "from es_tour.models import load_labeler\n"
        "load_labeler(sys.argv[1]).score('hello', [('1', 'world')])\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(out)], check=False,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_labeler_names_that_are_neither_registry_nor_path_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="path of a model directory"):
        load_labeler("no-such-model")
    with pytest.raises(ModelError, match="does not exist"):
        load_labeler(str(tmp_path / "missing"))


def test_bench_models_smoke_runs_end_to_end(fine_tuned, scifact, minilm_dir):
    result = bench_models.run(smoke=True, dataset=scifact, reranker=fine_tuned)
    assert set(result["cross"]["pairs_per_s"]) == {"pytorch_fp32", "onnx_fp32", "onnx_int8"}
    assert set(result["cross"]["pairs_per_s"]["onnx_int8"]) == {1, 16, 64}
    assert result["dual"]["texts_per_s"]["onnx_fp32"] > 0
    text = bench_models.render_markdown(result)
    assert "smoke run" in text and "| onnx_int8 / pytorch_fp32 |" in text
    assert "target" not in text.lower()
