"""The baselines every verdict names, on real engines over 100 SciFact test queries.

- `vector-rerank` (BM25's top 100 reranked by the stored retriever vectors, BERTserini's
  μ = 0.5) labels nothing and must beat BM25.
- `rerank-hybrid` at a budget of 20 pairs must not lose to `rerank` (of kNN) at the same
  budget.

The labeler is the default one (bge-small) reading its corpus vectors from the model
cache, so each pair is a row lookup: the same φ as at query time, in seconds.

Measured on OpenSearch (2026-11-23): bm25 0.7263, vector-rerank 0.7721, rerank:k=20
0.7411, rerank-hybrid:k=20 0.7572 nDCG@10. vector-rerank must keep about half its gain;
rerank-hybrid must not lose.
"""

from __future__ import annotations

import pytest

from es_tour.agents import CorpusLabeler
from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.pipeline import SearchContext
from integration_tests.conftest import ENGINES

QUERIES = 100
BUDGET = 20
VECTOR_GAIN = 0.02  # measured +0.046 over bm25
HYBRID_GAIN = 0.0  # measured +0.016 over rerank of kNN


@pytest.fixture(scope="module")
def corpus_labeler(scifact):
    from es_tour.models import DualEncoder, model_path
    from onnx_models import spec

    default = spec("default")
    return CorpusLabeler(DualEncoder(model_path(default.name), default.labeler_precision),
                         scifact, default.name)


@pytest.fixture(scope="module")
async def reports(nodes, scifact, scifact_index, retriever, corpus_labeler):
    """engine -> method label -> report."""
    methods = [MethodSpec.parse(m) for m in
               ("bm25", "vector-rerank", f"rerank:k={BUDGET}", f"rerank-hybrid:k={BUDGET}")]
    by_engine = {}
    for name, status in nodes.items():
        async with connect(name, status.url) as engine:
            context = SearchContext(engine, scifact_index, retriever, corpus_labeler)
            measured = await evaluate(context, scifact, methods, split="test",
                                      max_queries=QUERIES)
        by_engine[name] = {r.spec.label: r for r in measured}
    return by_engine


@pytest.mark.parametrize("engine", ENGINES)
def test_vector_rerank_beats_bm25_without_labelling(reports, engine):
    bm25 = reports[engine]["bm25"].metrics["ndcg@10"]
    vector = reports[engine]["vector-rerank"].metrics["ndcg@10"]
    assert vector > bm25 + VECTOR_GAIN, f"vector-rerank {vector:.4f} vs bm25 {bm25:.4f}"
    assert set(reports[engine]["vector-rerank"].pairs_scored) == {0}


@pytest.mark.parametrize("engine", ENGINES)
def test_rerank_hybrid_at_budget_20_is_no_worse_than_rerank_of_knn(reports, engine):
    rerank = reports[engine][f"rerank:k={BUDGET}"].metrics["ndcg@10"]
    hybrid = reports[engine][f"rerank-hybrid:k={BUDGET}"].metrics["ndcg@10"]
    assert hybrid >= rerank + HYBRID_GAIN, f"rerank-hybrid {hybrid:.4f} vs rerank {rerank:.4f}"
    assert set(reports[engine][f"rerank-hybrid:k={BUDGET}"].pairs_scored) == {BUDGET}
