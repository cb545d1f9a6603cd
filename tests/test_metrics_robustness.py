"""Robustness against a labeler-free reference, query by query: how often a method is
better or worse than hybrid-linear, and how often much worse."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from es_tour.cli._shared import print_table
from es_tour.evaluation import MethodReport, MethodSpec, report_json, robustness_against
from es_tour.metrics import HURT_AT, robustness
from es_tour.pipeline import RankedHit, SearchResult, Timings


def test_robustness_counts_wins_losses_ties_and_the_hurt_on_shared_queries():
    reference = {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5, "q5": 0.9}
    method = {"q1": 0.7, "q2": 0.5, "q3": 0.45, "q4": 0.5 - HURT_AT, "q5": 0.2,
              "unjudged-by-reference": 1.0}
    r = robustness(method, reference)
    assert (r.wins, r.losses, r.hurt, r.queries) == (1, 3, 2, 5)
    assert r.index == pytest.approx((1 - 3) / 5)
    assert r.hurt_share == pytest.approx(2 / 5)
    assert robustness({}, reference).index == 0.0


def _report(label: str, rankings: dict[str, list[str]]) -> MethodReport:
    results = {qid: SearchResult(label, [RankedHit(doc, 1.0) for doc in docs], [], 0, 0,
                                 Timings()) for qid, docs in rankings.items()}
    return MethodReport(MethodSpec.parse(label), {"ndcg@10": 0.5, "recall@100": 0.5,
                                                  "mrr@10": 0.5}, [1.0], [0], results)


def test_eval_reports_each_methods_robustness_against_the_reference():
    qrels = {"q1": {"r": 1}, "q2": {"r": 1}, "q3": {"r": 1}}
    reference = _report("hybrid-linear", {"q1": ["x", "r"], "q2": ["r"], "q3": ["r"]})
    method = _report("rerank-hybrid:k=20", {"q1": ["r"], "q2": ["x", "y", "r"], "q3": ["r"]})
    robust = robustness_against([reference, method], qrels, "hybrid-linear")
    assert list(robust) == ["rerank-hybrid:k=20"]
    assert (robust["rerank-hybrid:k=20"].wins, robust["rerank-hybrid:k=20"].losses) == (1, 1)
    assert robust["rerank-hybrid:k=20"].hurt == 1  # 1 → 0.5 at rank 3
    assert robustness_against([method], qrels, "hybrid-linear") == {}

    class Data:
        name = "tiny"

    summary = report_json(Data(), "opensearch", "test", [reference, method], robust,
                          "hybrid-linear")
    assert summary["robustness_against"] == "hybrid-linear"
    assert summary["methods"]["rerank-hybrid:k=20"]["robustness"]["hurt_share"] == \
        pytest.approx(1 / 3, abs=1e-4)
    assert "robustness" not in summary["methods"]["hybrid-linear"]
    out = io.StringIO()
    print_table(Console(file=out, width=200, color_system=None), "t", [reference, method], robust)
    assert "+1/-1" in out.getvalue() and "33.3%" in out.getvalue()
    assert "reference" in out.getvalue()
