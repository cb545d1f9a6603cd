"""One class per TOUR loss: the variant picks it, and each brings its own gradient and stop."""

from __future__ import annotations

import numpy as np

from es_tour.tour import HardLoss, QueryOptimizer, SoftLoss, TourConfig, hard_gradient, loss_for


def test_the_variant_picks_the_loss_with_the_configs_settings():
    assert loss_for(TourConfig(variant="hard", tau=0.1, p=0.7, scale=3.0)) == HardLoss(0.1, 0.7,
                                                                                       3.0)
    assert loss_for(TourConfig(variant="soft", tau=0.2)) == SoftLoss(0.2, 0.5, 5.0)


def test_the_losses_stop_by_their_own_rules():
    # every doc is a pseudo-positive with p=1, so hard stops; soft needs the top-1 highest
    phi = np.array([0.9, 1.0, 0.0])
    assert HardLoss(tau=100.0, p=1.0).converged(phi)
    assert not SoftLoss(tau=100.0, p=1.0).converged(phi)


def test_the_optimizer_steps_on_its_losss_gradient():
    rng = np.random.default_rng(0)
    q, C, phi = rng.normal(size=8), rng.normal(size=(5, 8)), rng.normal(size=5)
    config = TourConfig(variant="hard", scale=2.0)
    np.testing.assert_allclose(QueryOptimizer(config).gradient(q, C, phi),
                               hard_gradient(q, C, phi, config.tau, config.p, 2.0))
    soft = QueryOptimizer(TourConfig(variant="soft", scale=2.0)).gradient(q, C, phi)
    assert not np.allclose(soft, hard_gradient(q, C, phi, config.tau, config.p, 2.0))
