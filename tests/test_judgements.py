"""The judgements' side index records, read from a BEIR directory."""

from __future__ import annotations

import json
from pathlib import Path

from es_tour.datasets import BeirDataset
from es_tour.judgements import qrels_index, qrels_records


def _dataset(root: Path) -> BeirDataset:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "t", "text": "x"}))
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in [
        {"_id": "1", "text": " vitamin D "}, {"_id": "2", "text": "calcium"}]))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td.2\t2\n")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n2\td1\t1\n9\td1\t1\n")
    return BeirDataset(root)


def test_one_record_per_split_and_judged_query_with_its_text(tmp_path: Path) -> None:
    records = qrels_records(_dataset(tmp_path))
    assert records == [
        {"_id": "test:1", "query": "vitamin D", "query_id": "1", "split": "test",
         "judgements": {"d1": 1, "d.2": 2}},
        {"_id": "train:2", "query": "calcium", "query_id": "2", "split": "train",
         "judgements": {"d1": 1}},
    ]  # query 9 has no text, so nothing can look it up


def test_the_side_index_is_named_after_the_index() -> None:
    assert qrels_index("scifact") == "scifact-qrels"
