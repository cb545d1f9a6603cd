"""`es-tour eval` as a user runs it, on the real test OpenSearch: JSON, table and plot."""

from __future__ import annotations

import json

from integration_tests.test_cli_engine import es_tour


def test_eval_writes_the_documented_json_and_a_plot(nodes, scifact, scifact_index, tmp_path):
    output, plot = tmp_path / "results.json", tmp_path / "frontier.png"
    result = es_tour("eval", "--dataset", str(scifact.root), "--engine", "opensearch",
                     "--url", nodes["opensearch"].url, "--index", scifact_index,
                     "--methods", "bm25,knn,hybrid-rrf", "--max-queries", "5",
                     "--output", str(output), "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    report = json.loads(output.read_text())
    assert (report["dataset"], report["engine"], report["split"]) == ("scifact", "opensearch",
                                                                      "test")
    assert set(report["methods"]) == {"bm25", "knn", "hybrid-rrf"}
    assert set(report["methods"]["knn"]) == {"ndcg@10", "recall@100", "mrr@10",
                                             "latency_ms_p50", "latency_ms_p95",
                                             "pairs_scored_mean"}
    assert "hybrid-rrf" in result.stdout  # the printed table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_names_an_unknown_method(nodes, scifact, scifact_index):
    result = es_tour("eval", "--dataset", str(scifact.root), "--url", nodes["opensearch"].url,
                     "--index", scifact_index, "--methods", "bm25,tour-medium")
    assert result.returncode != 0
    assert "unknown method [tour-medium]" in result.stderr
    assert "Traceback" not in result.stderr
