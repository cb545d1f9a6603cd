"""Both engines give the same first-stage quality on SciFact test (all 300 queries), and
BM25 is Anserini's: 0.665 nDCG@10 for BEIR SciFact "multifield" (title and text, k1=0.9,
b=0.4, Lucene's English analysis)."""

from __future__ import annotations

from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.pipeline import SearchContext
from integration_tests.conftest import QUALITY_CONCURRENCY

ANSERINI_BM25_MULTIFIELD = 0.665


async def test_bm25_and_knn_ndcg_agree_across_engines(nodes, scifact, scifact_index, retriever,
                                                      corpus_labeler):
    ndcg = {}
    for name, status in nodes.items():
        async with connect(name, status.url) as engine:
            context = SearchContext(engine, scifact_index, retriever, corpus_labeler)
            # latency is not under test: each query is embedded once
            reports = await evaluate(context, scifact, [MethodSpec.parse("bm25"),
                                                        MethodSpec.parse("knn")],
                                     cold_labels=False, concurrency=QUALITY_CONCURRENCY)
        ndcg[name] = {r.spec.label: r.metrics["ndcg@10"] for r in reports}
    for method in ("bm25", "knn"):
        assert abs(ndcg["opensearch"][method] - ndcg["elasticsearch"][method]) <= 0.01, ndcg
    for engine in ndcg:
        assert abs(ndcg[engine]["bm25"] - ANSERINI_BM25_MULTIFIELD) <= 0.01, ndcg
    assert ndcg["opensearch"]["knn"] > 0.6, ndcg  # MiniLM lands near its BEIR figure
