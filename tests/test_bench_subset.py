"""The subset cut for timing runs: its judged docs kept, its size and its draw fixed."""

from __future__ import annotations

import json

import pytest

from es_tour.bench.subset import write_subset
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError


@pytest.fixture
def collection(tmp_path):
    root = tmp_path / "full"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"d{i}", "title": "", "text": f"doc {i}"}) + "\n"
        for i in range(50)))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(5)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{40 + i}\t1\n" for i in range(5)))
    return BeirDataset(root)


def test_the_first_queries_and_their_relevant_docs_are_kept(collection, tmp_path):
    assert write_subset(collection, docs=10, queries=3, out=tmp_path / "a") == (10, 3)
    cut = BeirDataset(tmp_path / "a")
    ids = {doc.id for doc in cut.corpus()}
    assert {"d40", "d41", "d42"} <= ids and len(ids) == 10
    assert list(cut.queries("test")) == ["q0", "q1", "q2"]
    assert cut.qrels("test") == {f"q{i}": {f"d{40 + i}": 1} for i in range(3)}
    write_subset(collection, docs=10, queries=3, out=tmp_path / "b")
    assert {doc.id for doc in BeirDataset(tmp_path / "b").corpus()} == ids  # a fixed draw
    assert ids != {"d40", "d41", "d42", *(f"d{i}" for i in range(7))}  # drawn, not the first


def test_more_relevant_docs_than_the_size_is_a_clear_error(collection, tmp_path):
    with pytest.raises(ConfigError, match="judge 5 docs relevant"):
        write_subset(collection, docs=4, queries=5, out=tmp_path / "c")
