"""`relevance-feedback` (Qdrant's Relevance Feedback Query) on the real OpenSearch over SciFact.

At a budget of 20 pairs it must label no more than 20 per query, and its one feedback
search must reorder what the plain kNN ranks: the formula's vector is sent to the engine,
so a no-op feedback would leave every query's ranking below the labelled docs as kNN's.

The labeler is the default one (bge-small) over its corpus vectors from the model cache,
as in test_baselines. One engine: the method is the same code on both, and the sidecar
tests run every method on both engines.
"""

from __future__ import annotations

import pytest

from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.ingest import ingest
from es_tour.pipeline import SearchContext
from integration_tests.conftest import QUALITY_CONCURRENCY, SCIFACT_INDEX

QUERIES = 20
BUDGET = 20


@pytest.fixture(scope="module")
async def reports(start_node, scifact, retriever, corpus_labeler):
    """method label -> report, on OpenSearch alone."""
    methods = [MethodSpec.parse(m) for m in
               ("knn", f"rerank:k={BUDGET}", f"relevance-feedback:budget={BUDGET}",
                f"relevance-feedback:budget={BUDGET}:k={BUDGET}")]
    async with connect("opensearch", start_node("opensearch").url) as engine:
        await ingest(engine, scifact, SCIFACT_INDEX, retriever, if_missing=True,
                     show_progress=False)
        context = SearchContext(engine, SCIFACT_INDEX, retriever, corpus_labeler)
        measured = await evaluate(context, scifact, methods, split="test",
                                  max_queries=QUERIES, cold_labels=False,
                                  concurrency=QUALITY_CONCURRENCY)
    return {r.spec.label: r for r in measured}


@pytest.mark.parametrize("label", [f"relevance-feedback:budget={BUDGET}",
                                   f"relevance-feedback:budget={BUDGET}:k={BUDGET}"])
def test_relevance_feedback_labels_at_most_its_budget_and_reorders_knn(reports, label):
    knn, feedback = reports["knn"], reports[label]
    assert len(feedback.results) == QUERIES
    for result in feedback.results.values():
        assert result.pairs_scored <= BUDGET
        assert [r.round for r in result.rounds] == [0, 1] and result.engine_calls == 3
        assert sum(len(r.labelled) for r in result.rounds) == result.pairs_scored
        assert sum(h.label is not None for h in result.hits) == result.pairs_scored
    assert max(r.pairs_scored for r in feedback.results.values()) == BUDGET
    # below the labelled docs: the feedback search's order, against kNN's for the same docs
    moved = []
    for query, result in feedback.results.items():
        below = [h.id for h in result.hits if h.label is None]
        initial = [h.id for h in knn.results[query].hits if h.id not in result.rounds[0].labelled
                   and h.id not in result.rounds[1].labelled]
        assert result.rounds[0].delta_q_norm > 0
        moved.append(below != initial[:len(below)])
    assert sum(moved) >= QUERIES // 2, "the feedback search ranked as the plain kNN does"


def test_relevance_feedback_finds_docs_the_knn_top_100_lacks(reports):
    """The feedback search reaches past what the initial kNN retrieved (Qdrant's point: it
    traverses the whole index, not a rerank of one list)."""
    knn = reports["knn"]
    feedback = reports[f"relevance-feedback:budget={BUDGET}"]
    assert any({h.id for h in result.hits} - {h.id for h in knn.results[query].hits}
               for query, result in feedback.results.items())


def test_relevance_feedback_at_k_equal_budget_keeps_reranks_labelled_top(reports):
    """k = budget labels kNN's top 20, as rerank:k=20 does, and ranks them by φ alike."""
    rerank = reports[f"rerank:k={BUDGET}"]
    feedback = reports[f"relevance-feedback:budget={BUDGET}:k={BUDGET}"]
    for query, result in feedback.results.items():
        assert ([h.id for h in result.hits[:BUDGET]]
                == [h.id for h in rerank.results[query].hits[:BUDGET]])
