"""The step-lookahead bench's features and policy scoring, on hand-made vectors (no engine)."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.bench.step_lookahead import (
    LOOKAHEAD_FEATURES,
    StepTrial,
    lookahead_features,
    policy_gain,
    report,
)

EYE = np.eye(5)
PHI = np.array([0.9, 0.5, 0.4, 0.1])


def _named(values: np.ndarray) -> dict[str, float]:
    return dict(zip(LOOKAHEAD_FEATURES, values.tolist(), strict=True))


def test_a_new_doc_beside_the_best_seen_doc_is_predicted_to_enter_the_answer():
    features = _named(lookahead_features(PHI, EYE[:4], EYE[[0, 3]], EYE[0], EYE[0] + EYE[1],
                                         k=3))
    bar = 0.4  # φ of A_t's 3rd doc
    assert features["predicted_phi_max"] == pytest.approx(0.9 - bar, abs=1e-6)
    assert features["nearest_phi_max"] == pytest.approx(0.9 - bar)
    assert features["predicted_entries"] == 1  # the twin of the 0.1 doc stays out
    assert features["top_similarity_max"] == pytest.approx(1.0)
    assert features["query_similarity_mean"] == pytest.approx(0.5)
    assert features["step_cosine"] == pytest.approx(1 / np.sqrt(2))
    assert features["phi_range"] == pytest.approx(0.9 - bar)


def test_a_step_that_brings_nothing_keeps_only_the_states_features():
    features = _named(lookahead_features(PHI, EYE[:4], np.zeros((0, 5)), EYE[0], EYE[1], k=3))
    assert features["phi_spread"] == pytest.approx(PHI.std())
    assert features["predicted_entries"] == 0 and features["top_similarity_max"] == 0


def test_the_policy_gains_only_where_it_steps():
    gains = np.array([0.1, -0.2, 0.0])
    assert policy_gain(gains, np.array([0.9, 0.1, 0.6])) == pytest.approx(0.1 / 3)
    assert policy_gain(gains, np.array([0.9, 0.9, 0.9])) == pytest.approx(-0.1 / 3)


def test_the_report_finds_a_feature_that_tells_the_gains_apart():
    rng = np.random.default_rng(0)

    def trials(n: int) -> list[StepTrial]:
        gains = rng.choice([-0.1, 0.0, 0.2], size=n)
        features = rng.normal(size=(n, len(LOOKAHEAD_FEATURES)))
        features[:, 0] = gains  # predicted_phi_max gives the gain away
        return [StepTrial(f, float(g)) for f, g in zip(features, gains, strict=True)]

    table = report(trials(300), trials(100))
    assert "| predicted_phi_max | 1.000 | 1.000 |" in table
    train_row = next(line for line in table.splitlines() if line.startswith("| train"))
    cells = [cell.strip() for cell in train_row.split("|")]
    perfect, policy = float(cells[6]), float(cells[7])
    assert policy == pytest.approx(perfect, abs=0.01)
