"""Quality on real data: TOUR against its kNN baseline on SciFact test, on OpenSearch.

Thresholds are the measured ones of the baseline itself: TOUR must beat kNN outright.
The first 100 of the 300 test queries keep the labeler's cost (about 3 docs/s for
bge-small on two cores) to minutes; `make bench` runs all 300.
"""

from __future__ import annotations

import pytest

from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.pipeline import SearchContext

QUERIES = 100


@pytest.fixture(scope="module")
async def scifact_test_reports(nodes, scifact, scifact_index, retriever, labeler):
    async with connect("opensearch", nodes["opensearch"].url) as engine:
        context = SearchContext(engine, scifact_index, retriever, labeler)
        # the defaults: k=10, at most 3 rounds
        specs = [MethodSpec.parse(s) for s in ("knn", "tour-hard", "tour-soft")]
        # latency is not under test: the methods may share the labeler's cached scores
        reports = await evaluate(
            context, scifact, specs, split="test", max_queries=QUERIES, cold_labels=False
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
