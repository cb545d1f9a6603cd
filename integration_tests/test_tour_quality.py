"""Quality on real data: TOUR against kNN and against rerank-of-kNN at the same labeler
budget, on SciFact test, on OpenSearch.

The labeler is the default one (bge-small) over SciFact's cached corpus vectors, the φ of
query time as row lookups; the first 100 of the 300 test queries keep the engine work to
a minute, and `make bench` runs all 300.
"""

from __future__ import annotations

import pytest

from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.pipeline import SearchContext
from integration_tests.conftest import QUALITY_CONCURRENCY

QUERIES = 100
BUDGET = 20  # TOUR's default pairs per query


@pytest.fixture(scope="module")
async def scifact_test_reports(nodes, scifact, scifact_index, retriever, corpus_labeler):
    async with connect("opensearch", nodes["opensearch"].url) as engine:
        context = SearchContext(engine, scifact_index, retriever, corpus_labeler)
        # TOUR's defaults: k=10 a round, exploring, 20 pairs; rerank labels kNN's top 20
        specs = [MethodSpec.parse(s) for s in ("knn", f"rerank:k={BUDGET}", "tour-hard",
                                               "tour-soft")]
        # latency is not under test: the methods may share the labeler's cached scores
        reports = await evaluate(
            context, scifact, specs, split="test", max_queries=QUERIES, cold_labels=False,
            concurrency=QUALITY_CONCURRENCY
        )
    return {r.spec.label: r for r in reports}


@pytest.mark.parametrize("method", ["tour-hard", "tour-soft"])
def test_tour_beats_knn_on_scifact_test(scifact_test_reports, method):
    tour = scifact_test_reports[method].metrics["ndcg@10"]
    knn = scifact_test_reports["knn"].metrics["ndcg@10"]
    assert tour > knn + 0.01, f"{method} nDCG@10 {tour:.4f} vs knn {knn:.4f}"


def test_tour_trace_reports_rounds_and_costs(scifact_test_reports):
    results = scifact_test_reports["tour-hard"].results.values()
    assert all(r.pairs_scored >= 1 and r.rounds for r in results)
    assert all(r.pairs_scored == sum(t.newly_scored for t in r.rounds) for r in results)
    moved = [t for r in results for t in r.rounds if t.delta_q_norm is not None]
    assert moved and all(t.delta_q_norm > 0 for t in moved)


def test_tour_optimiser_explores_and_keeps_up_with_rerank_at_equal_budget(scifact_test_reports):
    """Fails when the query update is a no-op: the round after round 0 would then label
    kNN's next ten, exactly rerank's pool."""
    tour, rerank = scifact_test_reports["tour-hard"], scifact_test_reports[f"rerank:k={BUDGET}"]
    assert all(r.pairs_scored <= BUDGET for r in tour.results.values())
    explored = [r for r in tour.results.values() if sum(t.newly_scored for t in r.rounds[1:])]
    assert len(explored) >= 0.9 * QUERIES, f"{len(explored)} of {QUERIES} labelled after round 0"
    pools = {qid: {doc for t in r.rounds for doc in t.labelled}
             for qid, r in tour.results.items()}
    knn_top = {qid: {h.id for h in r.hits[:BUDGET]} for qid, r in rerank.results.items()}
    moved = [qid for qid, pool in pools.items() if not pool <= knn_top[qid]]
    # measured: 100 of 100 pools hold docs outside kNN's top 20
    assert len(moved) >= 0.8 * QUERIES, f"{len(moved)} pools differ from kNN's top {BUDGET}"
    ndcg = {name: report.metrics["ndcg@10"] for name, report in scifact_test_reports.items()}
    # measured on these 100 queries: 0.7402 against 0.7411 (on all 300: 0.7110 against
    # 0.7056); what a no-op costs is caught above, this bounds the quality lost
    assert ndcg["tour-hard"] >= ndcg[f"rerank:k={BUDGET}"] - 0.01, ndcg

