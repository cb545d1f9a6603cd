"""RESULTS.md's method tables (each method's robustness beside its quality and cost) and
its sweeps' method labels."""

from es_tour.bench.results import METHOD_HEADER, _method_rows
from es_tour.bench.retrieval import TOUR_SWEEPS, Sweep
from es_tour.evaluation import MethodSpec

SUMMARY = {"ndcg@10": 0.75, "recall@100": 0.95, "mrr@10": 0.7, "latency_ms_p50": 30.0,
           "latency_ms_p95": 45.0, "pairs_scored_mean": 20.0, "engine_calls_mean": 4.0}


def test_a_methods_row_shows_its_robustness_against_the_labeler_free_pool() -> None:
    rows = _method_rows({
        "hybrid-linear": SUMMARY,
        "hybrid-tour": {**SUMMARY, "robustness": {"wins": 40, "losses": 10, "hurt": 6,
                                                  "queries": 300, "index": 0.1,
                                                  "hurt_share": 0.02}}})
    assert len(rows[0]) == len(METHOD_HEADER)
    assert dict(zip(METHOD_HEADER[-2:], rows[1][-2:], strict=True)) == {
        "robustness index vs hybrid-linear": "+0.10", "hurt ≥ 0.2 vs hybrid-linear": "2.0%"}
    assert rows[0][-2:] == ["—", "—"]  # the pool itself


def test_a_sweep_sets_its_parameter_in_place_of_the_bases_own() -> None:
    sweep = Sweep("tour-hard:k=10:max_rounds=3", "k", (10, 20))
    assert sweep.methods() == ["tour-hard:max_rounds=3:k=10", "tour-hard:max_rounds=3:k=20"]
    for each in TOUR_SWEEPS:  # every label parses: none gives an option twice
        assert all(MethodSpec.parse(label) for label in each.methods())
