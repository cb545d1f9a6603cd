"""The doc max_length choice (es_tour.bench.doc_length): made on train, never on test."""

from __future__ import annotations

import re

from es_tour.bench.doc_length import METHODS, TOLERANCE, choose, markdown

FRONTIER, RERANK = METHODS


def _scores(frontier: float, rerank: float) -> dict[str, float]:
    return {FRONTIER: frontier, RERANK: rerank}


def test_the_shortest_length_within_the_tolerance_on_every_method_is_chosen():
    train = {512: _scores(0.80, 0.78), 384: _scores(0.80 - TOLERANCE, 0.781),
             256: _scores(0.799, 0.78 - TOLERANCE - 0.001)}
    assert choose(train) == 384


def test_the_longest_is_kept_when_every_shorter_one_loses():
    train = {512: _scores(0.80, 0.78), 384: _scores(0.79, 0.78), 256: _scores(0.70, 0.70)}
    assert choose(train) == 512


def test_the_page_gives_each_length_its_cost_and_both_splits():
    result = {"command": "python -m es_tour.bench.doc_length", "date": "d", "machine": "m",
              "labeler": "bge", "precision": "int8", "sample_docs": 4, "repeats": 1,
              "batch": 16, "methods": list(METHODS), "tolerance": TOLERANCE,
              "ms_per_doc": {512: 100.0, 256: 40.0}, "chosen": 256,
              "ndcg@10": {"train": {512: _scores(0.8, 0.7), 256: _scores(0.8, 0.7)},
                          "test": {512: _scores(0.75, 0.65), 256: _scores(0.74, 0.66)}}}
    page = markdown(result)
    assert "| 256 | 40.0 | 0.40x |" in page
    assert "0.7400" in page and "0.6600" in page
    assert page.endswith("Chosen on train: **256 tokens**, 40.0 ms per new doc.\n")
    assert not re.search(r"\bmet\b|target", page)
