"""The frontier's specs and each budget's choice, from hand-made measurements (no engine)."""

from __future__ import annotations

import json
import re

import pytest

from es_tour.bench.frontier import (
    BUDGETS,
    METHODS,
    RESULTS_HEADING,
    RESULTS_IMAGE,
    chosen_per_budget,
    fused_spec,
    main,
    markdown,
    merge,
    plain_spec,
    plot,
    results_section,
    splice_results_section,
)


def _methods(best_gain: float, best_recall: float) -> dict[str, dict]:
    out = {}
    for budget in BUDGETS:
        for name in METHODS:
            spec = plain_spec(name, budget)
            fused = fused_spec(spec, 0.3, 0.1)
            base = 0.70 if name == "rerank-hybrid" else 0.69
            out[spec.label] = {"method": name, "name": spec.name, "budget": budget,
                               "fused": False, "ndcg@10": base, "recall@100": 0.95,
                               "pairs_scored_mean": budget,
                               "ndcg@10_per_round": [base, base + 0.001], "operators": {}}
            gain = best_gain if name == "rerank-hybrid" else 0.0
            out[fused.label] = {**out[spec.label], "fused": True, "ndcg@10": base + gain,
                                "recall@100": best_recall if gain else 0.95}
    return out


def test_every_spec_is_capped_at_its_budget_and_refiners_get_two_rounds():
    assert plain_spec("rerank-hybrid", 20).options == {"k": 20}
    assert plain_spec("tour-hard", 10).options == {"budget": 10, "k": 5}
    assert plain_spec("hybrid-tour", 40).options == {"budget": 40, "k": 10}
    assert plain_spec("hre", 40).options == {"budget": 40}
    linear = plain_spec("rerank:first_stage=hybrid-linear", 10)
    assert linear.label == "rerank:k=10:first_stage=hybrid-linear" and linear.name == "rerank"


def _weights(chosen: str) -> dict[str, tuple[float, float, float]]:
    return {plain_spec(name, budget).label: (0.3, 0.1, 0.8 if name == chosen else 0.7)
            for budget in BUDGETS for name in METHODS}


def test_each_budget_gives_the_gain_and_recall_over_rerank_hybrid_and_no_verdict():
    lines = chosen_per_budget(_methods(0.012, 0.94), _weights("rerank-hybrid"))
    assert len(lines) == len(BUDGETS)
    for budget, line in zip(BUDGETS, lines, strict=True):
        label = fused_spec(plain_spec("rerank-hybrid", budget), 0.3, 0.1).label
        assert line.startswith(f"- **{budget} pairs:** chosen on train (0.8000): `{label}`, "
                               "test 0.7120: ")
        assert line.endswith("+0.0120 over rerank-hybrid (R@100 0.9400 against 0.9500).")
        assert not re.search(r"\bmet\b|target", line)


def test_each_line_names_the_method_train_chose_not_tests_best():
    lines = chosen_per_budget(_methods(0.012, 0.95), _weights("tour-hard"))
    assert all("`tour-hard:" in line and "-0.0100 over rerank-hybrid" in line for line in lines)


@pytest.mark.parametrize("engines", [("opensearch",), ("opensearch", "elasticsearch")])
def test_the_page_has_a_table_and_each_budgets_choice_per_engine(engines, tmp_path):
    methods = _methods(0.02, 0.95)
    weights = _weights("rerank-hybrid")
    page = markdown({"command": "c", "date": "d", "machine": "m", "test_queries": 300,
                     "train_queries": 809, "weights": weights,
                     "engines": {e: {"version": "1", "methods": methods} for e in engines}})
    assert page.count("**Per budget**") == len(engines)
    assert "Verdict" not in page and "target" not in page
    assert page.count("| 20 | `rerank-hybrid:k=20` | 0.7000 | 0.7200 |") == len(engines)
    plot(methods, tmp_path / "frontier.png", "t")  # one line per method, plain and fused
    assert (tmp_path / "frontier.png").stat().st_size > 0


def test_results_md_gets_each_budgets_choice_from_the_frontier_json_beside_it(tmp_path):

    assert results_section(tmp_path / "frontier.json") == []
    collected = {"date": "d", "test_queries": 300, "weights": _weights("rerank-hybrid"),
                 "engines": {"opensearch": {"version": "1", "methods": _methods(0.02, 0.95)}}}
    (tmp_path / "frontier.json").write_text(json.dumps(collected))
    section = results_section(tmp_path / "frontier.json")
    assert section[0] == "## The budget frontier"
    assert sum(line.endswith("+0.0200 over rerank-hybrid (R@100 0.9500 against 0.9500).")
               for line in section) == len(BUDGETS)
    assert not any("target" in line for line in section)


def test_the_page_gives_each_methods_robustness_against_the_reference(tmp_path):
    methods = _methods(0.02, 0.95)
    queries = [f"q{i}" for i in range(10)]
    for method in methods.values():  # every method better than the reference on 6 of 10
        method["ndcg@10_per_query"] = dict.fromkeys(queries, 0.5) | {"q0": 0.1, "q1": 0.4}
    reference = {"label": "hybrid-linear", "date": "d", "command": "c", "ndcg@10": 0.45,
                 "ndcg@10_per_query": dict.fromkeys(queries, 0.4)}
    page = markdown({"command": "c", "date": "d", "machine": "m", "test_queries": 10,
                     "train_queries": 809, "weights": _weights("rerank-hybrid"),
                     "engines": {"opensearch": {"version": "1", "methods": methods,
                                                "reference": reference}}})
    # 8 wins, 1 loss (q0, hurt by 0.3), 1 tie: index +0.7, 10% hurt
    assert "| 20 | `rerank-hybrid:k=20` | 0.7000 | 0.7200 | 0.9500 | 0.9500 | +0.700, 10.0% " \
           "| +0.700, 10.0% |" in page
    assert page.count("Against hybrid-linear (0.4500): robustness index, hurt share "
                      "+0.700, 10.0%.") == len(BUDGETS)
    assert "measured d by `c`" in page
    without = markdown({"command": "c", "date": "d", "machine": "m", "test_queries": 10,
                        "train_queries": 809, "weights": _weights("rerank-hybrid"),
                        "engines": {"opensearch": {"version": "1", "methods": methods}}})
    assert "| 0.9500 | – | – |" in without and "Against" not in without


def test_results_md_takes_the_frontier_of_a_run_that_measured_some_methods(tmp_path):
    some = ("rerank-hybrid", "hybrid-tour")
    methods = {label: m for label, m in _methods(0.02, 0.95).items() if m["method"] in some}
    collected = {"date": "d", "test_queries": 300, "weights": _weights("rerank-hybrid"),
                 "engines": {"opensearch": {"version": "1", "methods": methods}}}
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "frontier.json").write_text(json.dumps(collected))
    (tmp_path / "RESULTS.md").write_text(
        f"# R\n\n{RESULTS_HEADING}\n\nold\n\n{RESULTS_IMAGE}\n\n### Kept\n\nkept\n")
    splice_results_section(tmp_path / "RESULTS.md", tmp_path / "benchmarks" / "frontier.json")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "old" not in text and text.endswith(f"{RESULTS_IMAGE}\n\n### Kept\n\nkept\n")
    assert text.count("+0.0200 over rerank-hybrid") == len(BUDGETS)


def test_an_added_method_joins_the_run_without_changing_its_other_measurements(tmp_path):

    previous = {"command": "c", "date": "d", "machine": "m", "test_queries": 300,
                "train_queries": 809, "weights": _weights("rerank-hybrid"),
                "engines": {"opensearch": {"version": "1", "methods": _methods(0.02, 0.95)}}}
    label = plain_spec("hre", 20).label
    new_weights = {**previous["weights"], label: (0.3, 0.1, 0.9)}
    measured = {label: {**previous["engines"]["opensearch"]["methods"][label], "ndcg@10": 0.8}}
    new = {"date": "later", "weights": new_weights,
           "engines": {"opensearch": {"version": "1", "methods": measured}}}
    merged = merge(previous, new, ["hre"], "python -m es_tour.bench.frontier --add hre")
    methods = merged["engines"]["opensearch"]["methods"]
    assert methods[label]["ndcg@10"] == 0.8 and merged["weights"][label] == (0.3, 0.1, 0.9)
    kept = plain_spec("rerank-hybrid", 20).label
    assert methods[kept] == previous["engines"]["opensearch"]["methods"][kept]
    assert merged["date"] == "d" and merged["added"][0]["date"] == "later"
    assert "`hre` added on later" in markdown(merged)
    (tmp_path / "frontier.json").write_text(json.dumps(merged))
    assert "`hre` added later)" in results_section(tmp_path / "frontier.json")[2]


@pytest.mark.parametrize("argv", [["--add", "hre"], ["--reuse-weights", "--add", "bm25"]])
def test_add_takes_only_known_methods_over_a_kept_run(argv, tmp_path):
    with pytest.raises(SystemExit):
        main(["--dataset", str(tmp_path), "--out", str(tmp_path), *argv])


def test_the_frontier_sets_the_choice_against_the_defaults_on_queries_new_to_train():
    """A labeler that wins on all test queries is also set against the default labeler's
    choice on the queries whose relevant docs train never judged, from per-query figures."""
    from es_tour.bench.frontier import BEFORE, LABELERS, frontier_per_budget

    def run(per_query: dict[str, float], train: float) -> dict:
        methods = {label: {**m, "ndcg@10_per_query": per_query}
                   for label, m in _methods(0.02, 0.95).items()}
        weights = {label: (w_bm25, w_dense, train) for label, (w_bm25, w_dense, _)
                   in _weights("rerank-hybrid").items()}
        return {"name": "n", "weights": weights,
                "engines": {"opensearch": {"version": "1", "methods": methods}}}

    runs = {LABELERS[0]: run({"seen": 0.5, "new": 0.6}, 0.70),
            "tuned": run({"seen": 0.9, "new": 0.65}, 0.75)}
    lines = frontier_per_budget(runs, ["new"])
    assert all("labeler `n`" in line for line in lines)
    assert all(f"over the frontier before ensembles ({BEFORE[budget]:.4f}). On the" in line
               and "target" not in line for budget, line in zip(BUDGETS, lines, strict=True))
    assert all("On the 1 test queries whose relevant docs train never judged: 0.6500 "
               "against 0.6000 (+0.0500)" in line for line in lines)
    assert not any("never judged" in line for line in frontier_per_budget(runs))
