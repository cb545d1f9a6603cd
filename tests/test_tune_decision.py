"""tune's decision whether a labelling method pays (`tuning.decide`), hybrid-linear's fitted
weight, and the costs it reads from the load benchmark's JSON (no engine)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from es_tour.cli.tune import LOAD_BENCH, _cost_of, measured_costs, stale_settings
from es_tour.errors import ConfigError
from es_tour.metrics import CHANGED, robustness
from es_tour.tuning import (
    Cost,
    LinearPool,
    Measured,
    decide,
    fit_lexical_weight,
    fused_spec,
    labeler_free,
    plain_spec,
)

QUERIES = [f"q{i}" for i in range(10)]
TOUR = "hybrid-tour:budget=20"
RERANK = "rerank-hybrid:k=20"
LINEAR = "hybrid-linear:lexical_weight=0.4"


def scores(*values: float) -> dict[str, float]:
    """Per-query nDCG@10 over `QUERIES`: the values given, repeated in turn."""
    return {qid: values[i % len(values)] for i, qid in enumerate(QUERIES)}


def candidates(tour: dict[str, float], rerank: dict[str, float], bm25: dict[str, float],
               linear: dict[str, float]) -> list[Measured]:
    return [Measured(TOUR, tour, True, Cost(30.4, 26.4)), Measured(RERANK, rerank, True),
            Measured("bm25", bm25, False, Cost(1.0, 1.7)), Measured(LINEAR, linear, False)]


def test_a_refining_method_that_gains_enough_without_losing_more_queries_is_kept():
    decision = decide(candidates(scores(0.8, 0.6), scores(0.5), scores(0.4), scores(0.6, 0.5)))
    assert (decision.kept, decision.off, decision.against) == (TOUR, False, LINEAR)
    tour = decision.standings[0]
    assert (round(tour.gain, 4), tour.wins, tour.losses) == (0.15, 10, 0)
    assert decision.reason == (
        f"{TOUR} beats {LINEAR}, the best labeler-free candidate, by at least 0.01 nDCG@10 on "
        "the 10 validation queries with (wins − losses) / queries ≥ 0.0 (+0.1500, 10 wins, 0 "
        "losses), so it is worth its labelling (cost: engine CPU 30.4×, p50 26.4× a plain "
        "search).")


def test_a_gain_that_loses_more_queries_than_it_wins_is_not_kept():
    # +0.13 on average from 4 big wins, but 6 of the 10 queries lose 0.05
    tour = {qid: (0.9 if i < 4 else 0.45) for i, qid in enumerate(QUERIES)}
    decision = decide(candidates(tour, scores(0.3), scores(0.4), scores(0.5)))
    assert decision.standings[0].gain == pytest.approx(0.13)
    assert (decision.standings[0].wins, decision.standings[0].losses) == (4, 6)
    assert (decision.kept, decision.off) == (LINEAR, False)
    assert decision.reason == (
        f"No refining candidate beats {LINEAR} by at least 0.01 nDCG@10 on the 10 validation "
        f"queries with (wins − losses) / queries ≥ 0.0 (the best, {TOUR}: +0.1300, 4 wins, 6 "
        f"losses), so tune recommends {LINEAR}, which needs no labeler.")
    # a rule that tolerates more losses keeps it
    assert decide(candidates(tour, scores(0.3), scores(0.4), scores(0.5)),
                  min_robustness=-0.2).kept == TOUR


def test_with_plain_bm25_best_and_no_gain_over_it_tour_stays_off():
    decision = decide(candidates(scores(0.905), scores(0.9), scores(0.9), scores(0.8)))
    assert (decision.kept, decision.off, decision.against) == ("bm25", True, "bm25")
    assert decision.reason.endswith(
        "so TOUR stays off: plain BM25, the application's own search, is the best candidate.")
    # the margin is the option's: a smaller one keeps the 0.005 gain
    assert decide(candidates(scores(0.905), scores(0.9), scores(0.9), scores(0.8)),
                  min_gain=0.005).kept == TOUR


def test_rerank_hybrid_is_kept_where_the_choice_trails_it_and_it_pays():
    decision = decide(candidates(scores(0.6), scores(0.7), scores(0.5), scores(0.55)))
    assert (decision.kept, decision.off) == (RERANK, False)
    assert "cost: not measured" in decision.reason


def test_on_a_tie_between_the_labeler_free_candidates_plain_bm25_is_the_best():
    decision = decide(candidates(scores(0.5), scores(0.5), scores(0.7), scores(0.7)))
    assert (decision.against, decision.kept, decision.off) == ("bm25", "bm25", True)


def test_wins_and_losses_are_moves_over_the_threshold():
    theirs = {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}
    mine = {"a": 0.5 + CHANGED * 2, "b": 0.5 + CHANGED / 2, "c": 0.5 - CHANGED / 2,
            "d": 0.5 - CHANGED * 2}
    versus = robustness(mine, theirs)
    assert (versus.wins, versus.losses) == (1, 1)


def test_decide_needs_both_kinds_of_candidate():
    with pytest.raises(ConfigError, match="labeler-free and refining"):
        decide([Measured("bm25", scores(0.5), False)])
    with pytest.raises(ConfigError, match="labeler-free and refining"):
        decide([Measured(TOUR, scores(0.5), True)])


def test_hybrid_linears_weight_is_fitted_on_the_grid():
    # BM25 puts the relevant doc first, kNN last: any weight above 1/2 ranks it first, and
    # the grid's least such weight is fitted (the earlier on a tie)
    pool = LinearPool(["rel", "a", "b"], np.array([3.0, 0.0, 0.0]), np.array([0.0, 1.0, 1.0]))
    weight, ndcg = fit_lexical_weight({"q": pool}, {"q": {"rel": 1}})
    assert (weight, ndcg) == (0.6, 1.0)
    assert [spec.label for spec in labeler_free(weight)] == ["bm25",
                                                             "hybrid-linear:lexical_weight=0.6"]


def _bench(tmp_path, rows):
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"settings": {
        "index.tour.enabled": True, "index.tour.method": "hybrid-tour",
        "index.tour.pool": "hybrid-linear", "index.tour.lexical": "none", "index.tour.k": 10,
        "index.tour.budget": 20, "index.tour.bm25_weight": 0.3},
        "engines": [{"engine": "opensearch", "rows": rows}]}))
    return path


def _row(side, tour, cpu, p50):
    return {"side": side, "tour": tour, "engine_cpu_ms": cpu, "p50_ms": p50}


def test_costs_are_read_against_the_plain_match_and_matched_on_what_runs(tmp_path):
    path = _bench(tmp_path, [_row("engine", None, 2.0, 4.0),
                             _row("methods", {"method": "hybrid-linear"}, 30.0, 40.0),
                             _row("methods", {"method": "rerank-hybrid", "k": 20}, 32.0, 50.0),
                             _row("index", None, 60.0, 100.0),
                             _row("baseline", None, 140.0, 160.0)])
    costs = measured_costs(path, "opensearch")
    tour = fused_spec(plain_spec("hybrid-tour:pool=hybrid-linear:lexical=none", 20), 0.5, 0.1)
    assert _cost_of(tour, costs) == Cost(30.0, 25.0)  # weights do not change what runs
    assert _cost_of(plain_spec("rerank-hybrid", 20), costs) == Cost(16.0, 12.5)
    assert _cost_of(plain_spec("rerank-hybrid", 10), costs) is None  # another budget
    assert _cost_of(labeler_free(0.7)[1], costs) == Cost(15.0, 10.0)
    assert _cost_of(labeler_free(0.7)[0], costs) is None
    assert measured_costs(path, "elasticsearch") == []
    assert measured_costs(tmp_path / "missing.json", "opensearch") == []


def test_a_file_that_is_not_the_load_benchmarks_is_a_clear_error(tmp_path):
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"engines": [{"engine": "opensearch", "rows": [{}]}]}))
    with pytest.raises(ConfigError, match="not the load benchmark's JSON"):
        measured_costs(path, "opensearch")


def test_the_committed_load_benchmark_prices_the_frontiers_20_pair_method():
    tour = plain_spec("hybrid-tour:pool=hybrid-linear:lexical=none", 20)
    for engine in ("opensearch", "elasticsearch"):
        cost = _cost_of(tour, measured_costs(LOAD_BENCH, engine))
        assert cost is not None and cost.engine_cpu > 1 and cost.p50 > 1


def test_apply_resets_an_earlier_methods_settings_but_keeps_where_the_docs_are():
    current = {"index.tour.pool": "interleave", "index.tour.budget": "40",
               "index.tour.method": "tour-hard", "index.tour.vector_field": "emb",
               "index.tour.text_fields": "body", "index.tour.encoder": "e5-small-v2",
               "index.tour.vector_store_shards": "4", "index.number_of_shards": "2"}
    written = {"index.tour.method": "hybrid-linear", "index.tour.lexical_weight": 0.4}
    assert stale_settings(current, written) == {"index.tour.pool": None,
                                                "index.tour.budget": None}
