"""`es-tour train-reranker` against a real engine: mined negatives, no test query in training."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from es_tour.datasets import BeirDataset
from es_tour.models import CrossEncoder
from es_tour.training._mining import mine_candidates
from es_tour.training._reranker import TRAINING_FILE


@pytest.fixture(scope="module")
def trained(nodes, scifact, scifact_index, tmp_path_factory):
    """A one-step run on the opensearch test node, small enough for CI."""
    out = tmp_path_factory.mktemp("reranker")
    result = subprocess.run(
        [sys.executable, "-m", "es_tour", "train-reranker", "--dataset", str(scifact.root),
         "--engine", "opensearch", "--url", nodes["opensearch"].url, "--index", scifact_index,
         "--out", str(out), "--no-knn", "--depth", "10", "--steps", "1", "--negatives", "2",
         "--max-length", "32", "--validation-queries", "2", "--teacher", "retriever"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return out, json.loads((out / TRAINING_FILE).read_text())


@pytest.mark.training
def test_the_run_writes_a_loadable_cross_model(trained):
    out, record = trained
    assert CrossEncoder(out).score("vitamin d", ["Vitamin D and bones."]).shape == (1,)
    assert record["steps"] == 1 and record["split"] == "train"
    assert record["teacher"]["model"] == "minilm-l6"
    assert record["candidates"]["first_stages"] == ["bm25"]


@pytest.mark.training
def test_no_test_query_reaches_training(trained, scifact):
    _, record = trained
    used = set(record["train_query_ids"]) | set(record["validation_query_ids"])
    assert used and used <= set(scifact.qrels("train"))
    assert not used & set(scifact.qrels("test"))


def test_training_on_the_test_split_is_refused(scifact, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "es_tour", "train-reranker", "--dataset", str(scifact.root),
         "--split", "test", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 1
    assert "test stays unseen" in result.stderr and "Traceback" not in result.stderr


async def test_mined_candidates_interleave_bm25_and_knn(engine, scifact, scifact_index,
                                                        retriever):
    data = BeirDataset(scifact.root).split("train")
    queries = dict(list(zip(data.query_ids, data.query_texts, strict=True))[:3])
    bm25_only = await mine_candidates(engine, scifact_index, queries, 5)
    both = await mine_candidates(engine, scifact_index, queries, 5, retriever)
    for qid in queries:
        assert len(bm25_only[qid]) == 5
        assert both[qid][0] == bm25_only[qid][0] and set(bm25_only[qid]) <= set(both[qid])
        assert len(both[qid]) <= 10 and len(set(both[qid])) == len(both[qid])
