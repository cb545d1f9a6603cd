"""Both engines give the same first-stage quality on SciFact test (all 300 queries)."""

from __future__ import annotations

from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.pipeline import SearchContext


async def test_bm25_and_knn_ndcg_agree_across_engines(nodes, scifact, scifact_index, retriever,
                                                      labeler):
    ndcg = {}
    for name, status in nodes.items():
        async with connect(name, status.url) as engine:
            context = SearchContext(engine, scifact_index, retriever, labeler)
            reports = await evaluate(context, scifact, [MethodSpec.parse("bm25"),
                                                        MethodSpec.parse("knn")])
        ndcg[name] = {r.spec.label: r.metrics["ndcg@10"] for r in reports}
    for method in ("bm25", "knn"):
        assert abs(ndcg["opensearch"][method] - ndcg["elasticsearch"][method]) <= 0.01, ndcg
    # BM25 (k1=0.9, b=0.4, standard analyzer) and MiniLM both land near their BEIR figures
    assert ndcg["opensearch"]["bm25"] > 0.6 and ndcg["opensearch"]["knn"] > 0.6, ndcg
