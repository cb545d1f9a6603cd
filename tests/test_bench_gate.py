"""The gate study's signals, AUC and fitted gate, on hand-made queries (no engine)."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.bench.gate import (
    SIGNALS,
    Gate,
    QueryStudy,
    auc,
    combined_auc,
    fit_gate,
    gated,
    markdown,
    outcome,
    refined,
    signals,
)
from es_tour.tuning import Pool


def _study(gain: float, margin: float) -> QueryStudy:
    return QueryStudy(0.5 + gain, 0.5, {"phi_margin": margin})


def test_signals_read_the_labelled_docs_and_both_rankings():
    found = Pool(["d1", "d2", "d3"], np.array([0.9, 0.5, 0.7]), np.array([3.0, 1.0, 2.0]),
                 np.array([0.8, 0.2, 0.5]), ["d4"])
    got = signals("two words", found, ["d1", "d3", "d2", "d4"], ["d2", "d4", "d1"])
    assert got["agreement"] == pytest.approx(1.0)  # φ orders them as BM25 and kNN do
    assert got["phi_top"] == pytest.approx(0.9) and got["phi_margin"] == pytest.approx(0.2)
    assert got["overlap"] == pytest.approx(0.3)  # of ten: d1, d2, d4 in both tops
    # the refined top's labelled docs average 0.7, the pool top's (d2, d1) 0.7
    assert got["lift"] == pytest.approx(0.0) and got["query_terms"] == 2.0


def test_auc_is_one_where_the_signal_ranks_every_positive_first_and_half_without_pairs():
    assert auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auc([0.1, 0.8, 0.9], [True, True, False]) == 0.0
    assert auc([0.1, 0.95, 0.9], [True, True, False]) == pytest.approx(0.5)
    assert auc([0.1, 0.2], [False, False]) == 0.5


def test_a_gate_keeps_the_pool_where_its_signal_says_the_labeler_is_unsure():
    studies = {f"q{i}": _study(gain, margin) for i, (gain, margin) in enumerate(
        [(-0.3, 0.01), (-0.25, 0.02), (0.2, 0.3), (0.1, 0.2), (0.05, 0.4), (0.0, 0.25)])}
    everything = outcome(studies, refined)
    assert everything.hurt_share == pytest.approx(2 / 6)
    assert everything.index == pytest.approx(1 / 6)  # 3 gains, 2 losses
    gate, found = fit_gate(studies, "phi_margin")
    assert gate.threshold is not None and not gate.below
    assert not gate.refines(studies["q0"]) and gate.refines(studies["q2"])
    assert found.hurt_share == 0.0 and found.index == pytest.approx(3 / 6)
    assert found.ndcg > everything.ndcg
    assert outcome(studies, gated(Gate("phi_margin", None))) == everything


def test_no_gate_is_fitted_where_holding_back_costs_mean_ndcg():
    # the one loss has a middling margin: no threshold drops it without dropping gains
    studies = {f"q{i}": _study(gain, margin) for i, (gain, margin) in enumerate(
        [(0.2, 0.01), (-0.3, 0.02), (0.3, 0.05)])}
    gate, found = fit_gate(studies, "phi_margin")
    assert gate.threshold is None and found == outcome(studies, refined)


def test_the_combined_model_finds_a_signal_that_tells_losses_from_gains():
    rng = np.random.default_rng(0)
    studies = {}
    for i in range(60):
        gain = 0.2 if i % 2 else -0.2
        values = dict.fromkeys(SIGNALS, 0.0) | {name: float(rng.normal()) for name in SIGNALS}
        values["phi_margin"] = gain + float(rng.normal(0, 0.05))  # tells them apart
        studies[f"q{i}"] = QueryStudy(0.5 + gain, 0.5, values)
    assert combined_auc(studies) > 0.9
    for study in studies.values():
        study.signals["phi_margin"] = 0.0  # now nothing does
    assert combined_auc(studies) < 0.75


def test_the_page_names_each_signal_and_its_gate_on_every_part():
    row = {"ndcg": 0.7, "index": 0.1, "hurt_share": 0.05, "refined_share": 0.9}
    parts = ("fit", "validation", "report")
    report = {"command": "c", "date": "d", "machine": "m", "engine": "opensearch",
              "method": "hybrid-tour:budget=20", "queries": dict.fromkeys(parts, 100),
              "baselines": {part: {"refined": row, "pool": row} for part in parts},
              "changed_queries": 40, "combined_auc_loss_changed": 0.6,
              "signals": [{"signal": "phi_margin", "rho_with_gain": 0.2, "auc_hurt": 0.3,
                           "auc_loss_changed": 0.4,
                           "gate": {"signal": "phi_margin", "threshold": 0.05, "below": False},
                           **dict.fromkeys(parts, row)}],
              "blends": [{"b": 1.0, **dict.fromkeys(parts, row)}]}
    page = markdown(report)
    assert ("| `phi_margin` | +0.200 | 0.300 | 0.400 | refine if ≥ 0.05 | "
            + " | ".join(["0.7000 | +0.100 | 5.0%"] * 3) + " |") in page
    assert "| refined | " + " | ".join(["0.7000 | +0.100 | 5.0%"] * 3) + " |" in page
    assert "reach an AUC of 0.600" in page
