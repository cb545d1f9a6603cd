"""final_scores: min-max normalised blend of labeler and retrieval scores."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.tour import final_scores

PHI = np.array([2.0, 4.0, 0.0, 3.0])
SIM = np.array([10.0, 0.0, 20.0, 5.0])


def test_final_scores_blend_min_max_normalised_scores():
    expected = 0.3 * np.array([0.5, 1.0, 0.0, 0.75]) + 0.7 * np.array([0.5, 0.0, 1.0, 0.25])
    np.testing.assert_allclose(final_scores(PHI, SIM, lam=0.3), expected)


def test_final_scores_with_lam_one_orders_by_phi_only():
    scores = final_scores(PHI, SIM, lam=1.0)
    np.testing.assert_allclose(scores, [0.5, 1.0, 0.0, 0.75])
    assert np.argsort(-scores).tolist() == np.argsort(-PHI).tolist()


def test_final_scores_with_lam_zero_orders_by_sim_only():
    scores = final_scores(PHI, SIM, lam=0.0)
    np.testing.assert_allclose(scores, [0.5, 0.0, 1.0, 0.25])
    assert np.argsort(-scores).tolist() == np.argsort(-SIM).tolist()


def test_final_scores_treat_a_constant_vector_as_zeros():
    np.testing.assert_allclose(
        final_scores(np.full(4, 7.0), SIM, lam=0.5), 0.5 * np.array([0.5, 0.0, 1.0, 0.25])
    )
    np.testing.assert_allclose(final_scores(np.array([3.0]), np.array([1.0]), lam=0.5), [0.0])


def test_final_scores_reject_lam_outside_unit_interval():
    with pytest.raises(ValueError, match=r"1\.5"):
        final_scores(PHI, SIM, lam=1.5)
