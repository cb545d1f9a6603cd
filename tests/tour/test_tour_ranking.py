"""final_scores (min-max blend of labeler and retrieval scores), fused_scores (z-scored) and
hybrid_scores (z-scored BM25 and q·c, no labels)."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.errors import ConfigError
from es_tour.tour import final_scores, fused_scores, hybrid_scores

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


def test_fused_scores_at_zero_weights_rank_by_phi_and_ignore_affine_maps() -> None:
    rng = np.random.default_rng(3)
    phi, bm25, dense = rng.normal(size=(3, 12))
    assert np.argsort(-fused_scores(phi, bm25, dense, 0, 0)).tolist() == np.argsort(-phi).tolist()
    np.testing.assert_allclose(fused_scores(phi, bm25, dense, 0.4, 0.2),
                               fused_scores(3 * phi + 1, 0.5 * bm25 - 7, 2 * dense, 0.4, 0.2))


def test_fused_scores_let_bm25_overturn_a_small_phi_gap() -> None:
    phi, bm25, dense = np.array([0.51, 0.50, 0.1]), np.array([1.0, 9.0, 0.0]), np.zeros(3)
    assert np.argmax(fused_scores(phi, bm25, dense, 0.0, 0.0)) == 0
    assert np.argmax(fused_scores(phi, bm25, dense, 0.5, 0.0)) == 1


def test_fused_scores_reject_mismatched_shapes() -> None:
    with pytest.raises(ConfigError, match="must all be"):
        fused_scores(np.zeros(3), np.zeros(2), np.zeros(3), 0.1, 0.1)


def test_hybrid_scores_are_a_convex_combination_of_z_scores() -> None:
    bm25, dense = np.array([0.0, 2.0, 4.0]), np.array([0.9, 0.1, 0.5])
    z_bm25, z_dense = np.array([-1.0, 0.0, 1.0]) * np.sqrt(1.5), (dense - 0.5) / dense.std()
    np.testing.assert_allclose(hybrid_scores(bm25, dense, 0.25), 0.25 * z_bm25 + 0.75 * z_dense)
    assert np.argmax(hybrid_scores(bm25, dense, 0.0)) == 0  # the dense ranking alone
    assert np.argmax(hybrid_scores(bm25, dense, 1.0)) == 2  # BM25's alone


@pytest.mark.parametrize(("bm25", "dense", "weight", "message"), [
    (np.zeros(3), np.zeros(2), 0.5, "must both be"),
    (np.zeros(3), np.zeros(3), 1.5, "lexical_weight"),
])
def test_hybrid_scores_reject_bad_input(bm25, dense, weight, message) -> None:
    with pytest.raises(ConfigError, match=message):
        hybrid_scores(bm25, dense, weight)
