"""`make bench`'s pipeline end to end on 5 test queries (`--smoke`), on both real engines.

No timing is asserted: this checks that every benchmark runs (the models bench has its
own smoke test, in tests/models) and that RESULTS.md and the plots are written from what
it measured. The labeler is the retriever itself at its int8 doc precision, whose corpus
vectors ingest already cached, so the smoke run takes minutes on two cores.
"""

from __future__ import annotations

import json
import os
import shutil

import httpx
import pytest

from es_tour.agents import policy_dir
from es_tour.bench.__main__ import main
from es_tour.bench.proxy import tour_off
from es_tour.bench.retrieval import ALL_METHODS, REFERENCE


@pytest.fixture(scope="module")
def smoke_run(nodes, scifact, scifact_index, tmp_path_factory):
    """The smoke run, the same whatever the model cache holds: no `make reranker` model is
    read, and its policy goes under a name of its own (not `make bench`'s), removed after."""
    out = tmp_path_factory.mktemp("bench")
    policy = f"it-bench-smoke-{os.getpid()}"
    try:
        main(["--dataset", str(scifact.root), "--opensearch", nodes["opensearch"].url,
              "--elasticsearch", nodes["elasticsearch"].url, "--index", scifact_index,
              "--labeler", "retriever", "--labeler-precision", "int8", "--out", str(out),
              "--smoke", "--no-cross-encoder", "--policy", policy])
    finally:
        shutil.rmtree(policy_dir(policy), ignore_errors=True)
    return out, json.loads((out / "results.json").read_text())


def test_every_method_runs_on_both_engines(smoke_run):
    _, results = smoke_run
    for engine in ("opensearch", "elasticsearch"):
        methods = results["engines"][engine]["methods"]
        assert set(methods) == set(ALL_METHODS)
        assert all(m["queries"] == 5 for m in methods.values())
        assert all(0.0 <= m["ndcg@10"] <= 1.0 for m in methods.values())
        assert methods["rerank:k=40"]["pairs_scored_mean"] == 40
        assert methods["knn"]["pairs_scored_mean"] == 0
        # every method against the labeler-free pool, on the same queries
        assert "robustness" not in methods[REFERENCE]
        assert all(m["robustness"]["queries"] == 5 for label, m in methods.items()
                   if label != REFERENCE)


def test_per_round_quality_and_operators_are_recorded(smoke_run):
    _, results = smoke_run
    methods = results["engines"]["opensearch"]["methods"]
    assert len(methods["rocchio"]["ndcg@10_per_round"]) == 2  # Rocchio never stops early
    assert len(methods["rm3-agent"]["ndcg@10_per_round"]) > 1
    assert set(methods["rm3-agent"]["operators"]) == {"+"}


def test_sweeps_ingest_and_sub_reports_are_filled(smoke_run):
    _, results = smoke_run
    assert [s["parameter"] for s in results["sweeps"]] == ["lr", "m"]
    assert all(s["best"] in s["ndcg@10"] for s in results["sweeps"])
    assert results["ingest"]["docs"] == 16 and results["ingest"]["ratio"] > 0
    assert "| direct |" in results["proxy_markdown"]


def test_results_markdown_and_plots_are_written(smoke_run):
    out, results = smoke_run
    text = (out / "RESULTS.md").read_text()
    for section in ("Quality and cost on opensearch", "Quality and cost on elasticsearch",
                    "Against the papers", "Hyper-parameters", "Ingest", "## Proxy"):
        assert section in text
    # the smoke leaves the models bench to its own smoke test (tests/models)
    assert results["models_markdown"] is None and "## Models" not in text
    assert "**TOUR-hard k=10" in text and "**The learned agent against HRE" in text
    assert f"| robustness index vs {REFERENCE} | hurt ≥ 0.2 vs {REFERENCE} |" in text
    for image in ("frontier", "latency", "rounds"):
        png = out / "img" / f"{image}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"img/{image}.png" in text


def test_the_proxy_bench_turns_tour_off_on_its_index_while_it_measures(nodes, scifact_index):
    """Its pass-through searches must pass through, on an index `tune --apply` enabled too."""
    settings = f"{nodes['opensearch'].url}/{scifact_index}/_settings"

    def enabled() -> str | None:
        answer = httpx.get(f"{settings}/index.tour.enabled", params={"flat_settings": "true"})
        # keyed by the index behind the alias; empty where the setting is not set
        return next((each["settings"]["index.tour.enabled"]
                     for each in answer.json().values()), None)

    before = enabled()
    httpx.put(settings, json={"index.tour.enabled": True}).raise_for_status()
    try:
        with tour_off(nodes["opensearch"].url, scifact_index):
            assert enabled() == "false"
        assert enabled() == "true"
    finally:
        httpx.put(settings, json={"index.tour.enabled": before}).raise_for_status()
