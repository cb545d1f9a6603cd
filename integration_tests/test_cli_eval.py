"""`es-tour eval` as a user runs it, on the real test OpenSearch: JSON, table and plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from es_tour.bench.subset import write_subset
from es_tour.recommended import FRONTIER_20
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
    # hybrid-linear, the labeler-free reference of the robustness columns, runs too
    assert set(report["methods"]) == {"bm25", "knn", "hybrid-rrf", "hybrid-linear"}
    assert set(report["methods"]["knn"]) == {"ndcg@10", "recall@100", "mrr@10",
                                             "latency_ms_p50", "latency_ms_p95",
                                             "pairs_scored_mean", "budget", "robustness"}
    assert report["robustness_against"] == "hybrid-linear"
    knn = report["methods"]["knn"]["robustness"]
    assert knn["queries"] == 5 and knn["wins"] + knn["losses"] <= 5
    assert knn["index"] == round((knn["wins"] - knn["losses"]) / 5, 4)
    assert "hybrid-rrf" in result.stdout and "RI" in result.stdout  # the printed table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_runs_each_labelling_method_at_each_budget(nodes, scifact, scifact_index,
                                                        tmp_path):
    output = tmp_path / "results.json"
    result = es_tour("eval", "--dataset", str(scifact.root), "--url", nodes["opensearch"].url,
                     "--index", scifact_index, "--methods", "knn,rerank:k=40,tour-hard",
                     "--budgets", "5,10", "--max-queries", "3", "--output", str(output))
    assert result.returncode == 0, result.stderr
    methods = json.loads(output.read_text())["methods"]
    assert {label: m["budget"] for label, m in methods.items()} == {
        "knn": None, "hybrid-linear": None, "rerank:k=5": 5, "rerank:k=10": 10,
        "tour-hard:budget=5": 5, "tour-hard:budget=10": 10}
    for label, summary in methods.items():
        assert summary["pairs_scored_mean"] <= (summary["budget"] or 0), label
    assert methods["rerank:k=10"]["pairs_scored_mean"] == 10
    assert "at 5 labeler pairs per query" in result.stdout
    assert "at 10 labeler pairs per query" in result.stdout


def test_eval_names_an_unknown_method(nodes, scifact, scifact_index):
    result = es_tour("eval", "--dataset", str(scifact.root), "--url", nodes["opensearch"].url,
                     "--index", scifact_index, "--methods", "bm25,tour-medium")
    assert result.returncode != 0
    assert "unknown method [tour-medium]" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def demo_node(start_node) -> Iterator[str]:
    """The OpenSearch test node; its shared `scifact` index gets its own `index.tour.*`
    back afterwards, so the demo's settings reach no other test (the playground's)."""
    url = start_node("opensearch").url
    yield url
    reset = httpx.put(f"{url}/scifact/_settings", json=dict.fromkeys(FRONTIER_20))
    assert reset.status_code == 200, reset.text


def test_demo_applies_the_frontier_settings_and_shows_the_indexs_method_first(demo_node,
                                                                             scifact):
    # OpenSearch only: the demo's engine (`make demo`); it ingests SciFact when missing
    url = demo_node
    result = subprocess.run(
        [sys.executable, "-m", "es_tour", "demo", "--dataset", str(scifact.root), "--engine",
         "opensearch", "--url", url, "--queries", "5", "--no-serve",
         "--later-round-scan", "0"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "160"})  # wide enough that no method name wraps
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # rich wraps titles to the terminal's width
    # the recommended settings are on the index, put through the engine, and said so
    settings = httpx.get(f"{url}/scifact/_settings/index.tour.*",
                         params={"flat_settings": "true"}).json()["scifact"]["settings"]
    assert settings | {key: str(value).lower() for key, value in FRONTIER_20.items()} == settings
    assert ("applied to scifact index.tour.{enabled: true, method: hybrid-tour, pool: "
            "hybrid-linear, lexical: none, k: 10, budget: 20, bm25_weight: 0.3, "
            "dense_weight: 0.0}: the budget frontier's choice on SciFact train at 20 labeler "
            "pairs per query (docs/benchmarks/frontier.md)") in out
    # the first comparison: knn and bm25, then the index's method, before any table
    configured = ("hybrid-tour:budget=20:k=10:pool=hybrid-linear:lexical=none:w_bm25=0.3"
                  ":w_dense=0.0")
    first = out[:out.index("At 10 labeler pairs per query")]
    heads = [first.index(f" {name} ") for name in ("knn", "bm25", configured)]
    assert heads == sorted(heads), first
    assert f"{configured} (the index's method) (20 pairs scored)" in first
    for budget in (10, 20):
        assert f"At {budget} labeler pairs per query" in out
    for method in ("rerank:k=10", "rerank-hybrid:k=10", "tour-hard:k=5:budget=10",
                   "hybrid-tour:budget=10:k=5:w_bm25=0.3:w_dense=0.0",
                   "rerank:k=20", "rerank-hybrid:k=20",
                   "hybrid-tour:budget=20:k=10:w_bm25=0.3:w_dense=0.0",
                   "rerank:k=10:first_stage=hybrid-linear:w_bm25=0.5:w_dense=0.1",
                   configured):
        assert f" {method} " in out, method
    assert f"the index's method: {configured}" in out
    # the playground's query, chosen from the compared queries, and why, in one line
    said = next(line for line in result.stdout.splitlines()
                if line.startswith("the playground opens on query "))
    assert ("the median gain of the" in said and "whose nDCG@10 it changed" in said) or \
        "the sample's first" in said, said
    # the first 5 queries hold no later-round find (query 133 is the first), and the scan
    # past them was turned off
    assert "No relevant doc in these queries' top 10 came from a later round" in out


def test_corpus_vectors_give_the_same_labels_as_encoding_each_doc(nodes, scifact, tmp_path):
    # the first 3 test queries, their relevant docs and others up to 150, in a temporary
    # directory: the data never enters the repo
    small = tmp_path / "scifact-small"
    write_subset(scifact, docs=150, queries=3, out=small)
    runs = {}
    for flag in ("--no-corpus-vectors", "--corpus-vectors"):
        output = tmp_path / f"{flag}.json"
        result = es_tour("eval", "--dataset", str(small), "--url", nodes["opensearch"].url,
                         "--index", f"scifact-small-{tmp_path.name}".lower(),
                         "--methods", "rerank:k=20,tour-hard", "--output", str(output), flag)
        assert result.returncode == 0, result.stderr
        runs[flag] = json.loads(output.read_text())["methods"]
    for method in ("rerank:k=20", "tour-hard"):
        encoded, cached = runs["--no-corpus-vectors"][method], runs["--corpus-vectors"][method]
        assert cached["ndcg@10"] == pytest.approx(encoded["ndcg@10"], abs=1e-4), method
        assert cached["pairs_scored_mean"] == encoded["pairs_scored_mean"], method


def test_eval_checks_its_methods_before_it_indexes(nodes, scifact):
    url = nodes["opensearch"].url
    result = es_tour("eval", "--dataset", str(scifact.root), "--url", url,
                     "--index", "it-cli-never", "--methods", "bm25,tour-medium")
    assert result.returncode == 1 and "unknown method [tour-medium]" in result.stderr
    assert httpx.head(f"{url}/it-cli-never").status_code == 404  # nothing was ingested


@pytest.mark.parametrize("args", [["--url", "http://127.0.0.1:9"], ["--index", "Not-Lower"]])
def test_an_engine_or_client_error_is_one_line(nodes, scifact, args):
    result = es_tour("index", "--dataset", str(scifact.root), "--url", nodes["opensearch"].url,
                     *args)
    assert result.returncode == 1 and result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
