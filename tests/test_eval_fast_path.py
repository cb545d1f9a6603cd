"""`es-tour eval` picks corpus vectors when they cost less than live labelling, and gives
an ETA once its first searches are done."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from es_tour.evaluation import (
    CORPUS_VECTORS_BREAK_EVEN,
    ETA_AFTER,
    LEAST_PAIRS_PER_QUERY,
    corpus_vectors_pay,
    eta_line,
    expected_pairs,
    parse_methods,
    progress_bar,
    with_budgets,
)


def test_label_once_counts_the_largest_budget_and_cold_labels_their_sum() -> None:
    specs = parse_methods("bm25,rerank:k=20,tour-hard:budget=30")
    assert expected_pairs(specs, 7, cold_labels=False) == 7 * 30
    assert expected_pairs(specs, 7, cold_labels=True) == 7 * (20 + 30)


def test_budgets_from_with_budgets_count_and_an_unset_budget_counts_its_least() -> None:
    specs = with_budgets(parse_methods("knn,rerank-hybrid"), [10, 40]) + parse_methods("hre")
    assert expected_pairs(specs, 3, cold_labels=True) == 3 * (10 + 40 + LEAST_PAIRS_PER_QUERY)


def test_methods_that_label_nothing_never_need_corpus_vectors() -> None:
    pairs = expected_pairs(parse_methods("bm25,knn,hybrid-linear"), 300, cold_labels=True)
    assert pairs == 0
    assert not corpus_vectors_pay(pairs, corpus_docs=10, cached=True)


def test_corpus_vectors_pay_from_the_break_even_share_of_the_corpus_or_when_cached() -> None:
    docs = 1000
    even = int(CORPUS_VECTORS_BREAK_EVEN * docs)
    assert corpus_vectors_pay(even, docs, cached=False)
    assert not corpus_vectors_pay(even - 1, docs, cached=False)
    assert corpus_vectors_pay(1, docs, cached=True)


def test_the_eta_line_extrapolates_the_rate_so_far() -> None:
    line = eta_line(10, 130, elapsed_s=5.0)  # 0.5 s a search, 120 to go: 60 s
    assert line.startswith("10/130 searches in 5 s") and "about 1 min 00 s left" in line


@pytest.mark.parametrize("total", [ETA_AFTER + 5, ETA_AFTER - 1])
def test_the_bar_prints_one_eta_line_once_the_first_searches_are_done(total: int) -> None:
    out = io.StringIO()
    with progress_bar("scifact test", total, Console(file=out, width=200)) as advance:
        for _ in range(total):
            advance("bm25")
    printed = [line for line in out.getvalue().splitlines() if "searches in" in line]
    if total > ETA_AFTER:
        assert len(printed) == 1 and printed[0].startswith(f"{ETA_AFTER}/{total} searches in")
    else:  # the run ended before an ETA was due
        assert printed == []
