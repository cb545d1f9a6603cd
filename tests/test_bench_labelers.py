"""The labelers' report from hand-made frontier runs (no engine): which method is a
labeler's best, refinement's own gain, wins and losses, and the RESULTS.md section."""

from __future__ import annotations

from es_tour.bench.frontier import BUDGETS, METHODS
from es_tour.bench.labelers import (
    SECTION_END,
    SECTION_START,
    best,
    changes,
    markdown,
    p1a,
    p1b,
    write,
)
from es_tour.tuning import fused_spec, plain_spec


def _run(train: dict[str, float], test: dict[str, float]) -> dict:
    weights, methods = {}, {}
    for budget in BUDGETS:
        for name in METHODS:
            plain = plain_spec(name, budget)
            weights[plain.label] = (0.3, 0.0, train.get(name, 0.70))
            fused = fused_spec(plain, 0.3, 0.0).label
            for label, shift in ((plain.label, -0.01), (fused, 0.0)):
                methods[label] = {"ndcg@10": test.get(name, 0.70) + shift,
                                  "ndcg@10_per_query": {"q1": 0.5, "q2": 0.5}}
    return {"name": "l", "weights": weights, "engines": {"opensearch": {"methods": methods}}}


def test_a_labelers_best_is_chosen_on_train_and_reported_on_test() -> None:
    run = _run(train={"hre": 0.80}, test={"hre": 0.60, "rerank": 0.75})
    assert best(run, 20, METHODS) == ("hre", "hre:budget=20:w_bm25=0.3:w_dense=0.0")
    rows = p1a(run)
    assert [row["method"].split(":")[0] for row in rows] == ["hre"] * len(BUDGETS)
    assert rows[0]["ndcg@10"] == 0.60  # test's figure, though rerank scores more on test
    assert rows[0]["rerank-hybrid"] == {"plain": 0.69, "fused": 0.70}


def test_refinements_own_gain_is_multi_round_against_single_round() -> None:
    run = _run(train={"tour-hard": 0.80, "rerank": 0.79}, test={"tour-hard": 0.72,
                                                                 "rerank": 0.74})
    row = p1b(run)[0]
    assert row["multi"].startswith("tour-hard") and row["single"].startswith("rerank:")
    assert round(row["multi_ndcg@10"] - row["single_ndcg@10"], 4) == -0.02


def test_wins_losses_and_the_robustness_index() -> None:
    mine = {"a": 0.9, "b": 0.5, "c": 0.2, "d": 0.505}
    theirs = {"a": 0.5, "b": 0.5, "c": 0.6, "d": 0.5}
    assert changes(mine, theirs) == {"queries": 4, "wins": 1, "losses": 1, "unchanged": 2,
                                     "robustness_index": 0.0, "hurt": 1,
                                     "mean_delta": 0.0013}


def test_the_section_replaces_itself_in_results_md(tmp_path) -> None:
    facts = {"name": "bge", "method": "m", "doc_ms": 110.0, "warm_p50_ms": 90.0,
             "plain_p50_ms": 45.0, "p1a": p1a(_run({}, {})), "p1b": p1b(_run({}, {})),
             "robustness": changes({"a": 1.0}, {"a": 0.0})}
    report = {"command": "c", "date": "d", "machine": "m", "chosen": "bge",
              "plain": {"queries": 1}, "labelers": {"bge": facts},
              "p2": {"hre": 0.7, "learned": 0.71, "hre_label": "hre", "learned_label": "la",
                     "moved": [{"query": "q", "delta": 0.01}],
                     **changes({"a": 1.0}, {"a": 0.0})}}
    page = markdown(report)
    assert "2.00×" in page and "1 wins, 0 losses" in page and "(chosen)" in page
    (tmp_path / "RESULTS.md").write_text("# Results\n\n## The budget frontier\n\nold\n")
    write(report, tmp_path)
    write(report, tmp_path)
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.count(SECTION_START) == 1 and text.count("### The learned agent against HRE") == 1
    assert text.index(SECTION_END) < text.index("## The budget frontier")
    assert (tmp_path / "benchmarks" / "labelers.md").read_text().startswith("# The labelers")


def _one_query_report() -> dict:
    """A labelers report of one labeler over one query, as bench.labelers writes it."""
    facts = {"name": "bge", "method": "m", "doc_ms": None, "warm_p50_ms": 90.0,
             "plain_p50_ms": 45.0, "p1a": [], "p1b": [],
             "robustness": changes({"a": 1.0}, {"a": 0.0})}
    return {"command": "c", "date": "d", "machine": "m", "chosen": "bge",
            "plain": {"queries": 1}, "labelers": {"bge": facts},
            "p2": {"hre": 0.7, "learned": 0.7, "hre_label": "hre", "learned_label": "la",
                   "moved": [], **changes({"a": 0.0}, {"a": 0.0})}}


def test_a_regenerated_results_page_keeps_the_section(tmp_path) -> None:
    import json

    from es_tour.bench.results import labelers_section

    assert labelers_section(tmp_path / "labelers.json") == []
    (tmp_path / "labelers.json").write_text(json.dumps(_one_query_report()))
    section = labelers_section(tmp_path / "labelers.json")
    assert section[0] == SECTION_START and section[2] == SECTION_END
    assert "not measured" in section[1] and "changed 0 of 1" in section[1]


def test_p2s_policy_is_named_for_its_labeler_and_checked_against_it(tmp_path, monkeypatch
                                                                      ) -> None:
    import json

    import pytest

    from es_tour.bench import labelers

    name = labelers.policy_name("bge-small-en-v1.5^1+e5-small-v2^0.25")
    assert name == "labelers-bge-small-en-v1-5-1-e5-small-v2-0-25"
    monkeypatch.setattr(labelers, "policy_dir", lambda policy: tmp_path / policy)
    (tmp_path / name).mkdir()
    manifest = {"threshold": 0.08, "created": "t", "training": {
        "labeler": "bge-small-en-v1.5", "split": "train", "queries": 809, "examples": 10,
        "positives": 2, "seconds": 150.0}}
    (tmp_path / name / "manifest.json").write_text(json.dumps(manifest))
    assert labelers.policy_facts(name, "bge-small-en-v1.5")["queries"] == 809
    with pytest.raises(SystemExit, match=r"trained with labeler 'bge-small-en-v1\.5'"):
        labelers.policy_facts(name, "bge-small-en-v1.5^1+e5-small-v2^0.25")


def test_a_re_measured_p2_says_so_and_names_its_policy() -> None:
    report = _one_query_report()
    report["p2"]["policy"] = {"name": "labelers-bge", "labeler": "bge", "queries": 809,
                              "examples": 30555, "positives": 1042, "threshold": 0.082,
                              "seconds": 147.0}
    report["remeasured"] = {"p2": {"command": "c --only p2", "date": "d2", "machine": "m2"}}
    page = markdown(report)
    assert page.count("Re-measured alone by `c --only p2`") == 1
    assert "`labelers-bge` was trained with the labeler it runs with (`bge`" in page
    assert "809 SciFact train queries" in page and "30,555 oracle trials" in page


def test_the_chosen_labelers_gain_is_paired_with_an_interval() -> None:
    from es_tour.bench.labelers import bootstrap_ci

    low, high = bootstrap_ci([0.01] * 50 + [-0.01] * 50)
    assert low < 0 < high
    assert bootstrap_ci([0.02] * 10) == (0.02, 0.02)
    facts = {"name": "ens", "method": "m", "doc_ms": None, "warm_p50_ms": 90.0,
             "plain_p50_ms": 45.0, "p1a": [], "p1b": [],
             "robustness": changes({"a": 1.0}, {"a": 0.0})}
    gain = {"budget": 20, "base": "bge", "base_method": "m20", "base_ndcg@10": 0.7359,
            "method": "m20", "ndcg@10": 0.7369, **changes({"a": 0.8}, {"a": 0.7}),
            "ci95": (-0.004, 0.006)}
    report = {"command": "c", "date": "d", "machine": "m", "chosen": "ens",
              "plain": {"queries": 1}, "labelers": {"ens": facts}, "gain": [gain],
              "p2": {"hre": 0.7, "learned": 0.7, "hre_label": "hre", "learned_label": "la",
                     "moved": [], **changes({"a": 0.0}, {"a": 0.0})}}
    page = markdown(report)
    assert "### `ens` against `bge`, query by query" in page
    assert "| 20 | `m20` 0.7369 | `m20` 0.7359 | +0.0010 | -0.0040 to +0.0060 | 1 / 0 / 0 |" \
        in page
    assert "never judged" not in page  # a run without the part new to train has no table
    gain["new_to_train"] = {"queries": 104, "ndcg@10": 0.7341, "base_ndcg@10": 0.7250,
                            "ci95": (-0.01, 0.03)}
    page = markdown(report)
    assert "On the 104 test queries whose relevant docs train never judged" in page
    assert "| 20 | 0.7341 | 0.7250 | +0.0091 | -0.0100 to +0.0300 |" in page
    assert "**The frontier**" not in page
    report["frontier"] = ["- **20 pairs:** chosen on train: labeler `tuned`"]
    assert "**The frontier**" in markdown(report) and "labeler `tuned`" in markdown(report)


def test_the_largest_moves_name_each_query_once() -> None:
    from es_tour.bench.labelers import largest

    moved = [{"query": q, "delta": d} for q, d in (("a", 0.4), ("b", 0.1))]
    assert largest(moved) == moved
    many = [{"query": str(i), "delta": 1.0 - i / 10} for i in range(8)]
    assert [m["query"] for m in largest(many)] == ["0", "1", "2", "5", "6", "7"]
