"""QueryOptimizer against torch.optim.SGD, and TourConfig validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from es_tour.errors import ConfigError, EsTourError
from es_tour.tour import QueryOptimizer, TourConfig, pseudo_positives, standardized


def torch_sgd_trajectory(q, C, phi, config: TourConfig, steps: int) -> list[np.ndarray]:
    q_t = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    C_t = torch.tensor(C, dtype=torch.float64)
    optimizer = torch.optim.SGD(
        [q_t], lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: 1 - t / config.max_rounds)
    positives = torch.as_tensor(pseudo_positives(phi, config.tau, config.p))
    p_phi = torch.softmax(torch.tensor(phi, dtype=torch.float64) / config.tau, dim=0)
    trajectory = []
    for _ in range(steps):
        optimizer.zero_grad()
        log_p_k = torch.log_softmax(config.scale * (C_t @ q_t), dim=0)
        if config.variant == "hard":
            loss = -torch.logsumexp(log_p_k[positives], dim=0)
        else:
            loss = torch.nn.functional.kl_div(log_p_k, p_phi, reduction="sum")
        loss.backward()
        optimizer.step()
        scheduler.step()
        trajectory.append(q_t.detach().numpy().copy())
    return trajectory


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("variant", ["hard", "soft"])
def test_optimizer_matches_torch_sgd_with_momentum_decay_and_linear_lr(seed, variant):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=16).astype(np.float32)
    C = rng.normal(size=(10, 16)).astype(np.float32)
    phi = rng.normal(scale=2.0, size=10)
    config = TourConfig(variant=variant, lr=0.2, k=10, max_rounds=3)
    expected = torch_sgd_trajectory(q, C, phi, config, steps=3)
    optimizer = QueryOptimizer(config)
    for expected_q in expected:
        q = optimizer.step(q, C, phi)
        assert q.dtype == np.float32
        np.testing.assert_allclose(q, expected_q, atol=1e-6)


def test_optimizer_refuses_a_step_past_max_rounds():
    optimizer = QueryOptimizer(TourConfig(max_rounds=1))
    q, C, phi = np.ones(2), np.eye(2), np.array([1.0, 0.0])
    optimizer.step(q, C, phi)
    with pytest.raises(EsTourError, match="max_rounds=1"):
        optimizer.step(q, C, phi)


@pytest.mark.parametrize("variant", ["hard", "soft"])
def test_standardized_labels_make_tau_independent_of_the_labelers_scale(variant):
    # a logit labeler's phi spans ~10, a cosine labeler's ~0.1: z-scored, they pull q alike
    rng = np.random.default_rng(5)
    q, C = rng.normal(size=8), rng.normal(size=(10, 8))
    cosine = rng.uniform(0.6, 0.7, size=10)
    logits = 100 * cosine - 60
    steps = {}
    for standardize in (False, True):
        config = TourConfig(variant=variant, standardize=standardize)
        steps[standardize] = [QueryOptimizer(config).step(q, C, phi) for phi in (cosine, logits)]
    np.testing.assert_allclose(*steps[True], atol=1e-6)
    assert not np.allclose(*steps[False], atol=1e-3)


def test_standardized_is_a_z_score_and_a_constant_vector_is_zeros():
    np.testing.assert_allclose(standardized(np.array([1.0, 2.0, 3.0])),
                               np.array([-1.0, 0.0, 1.0]) / np.std([-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(standardized(np.full(4, 0.3)), np.zeros(4))


def test_config_defaults_follow_the_paper_settings():
    config = TourConfig()
    assert (config.lr, config.tau, config.p, config.momentum, config.weight_decay) == (
        0.2,
        0.5,
        0.5,
        0.99,
        0.01,
    )


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        TourConfig().lr = 1.0  # type: ignore[misc]


def test_config_rejects_unknown_variant_listing_options():
    with pytest.raises(ConfigError, match=r"\['hard', 'soft'\].*'medium'"):
        TourConfig(variant="medium")


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("lr", 0.0),
        ("k", 0),
        ("k", 2.5),
        ("max_rounds", True),
        ("tau", -1.0),
        ("p", 1.5),
        ("p", 0.0),
        ("momentum", 1.0),
        ("weight_decay", -0.1),
        ("lam", 2.0),
        ("scale", 0.0),
        ("standardize", "true"),
        ("explore", 1),
        ("memory", "some"),
        ("stop", "top5"),
        ("budget", 0),
        ("budget", 2.5),
    ],
)
def test_config_range_errors_echo_the_bad_value(field, bad):
    with pytest.raises(ConfigError, match=f"tour.{field}.*{bad!r}"):
        TourConfig(**{field: bad})


def test_config_from_mapping_rejects_unknown_keys_listing_supported_ones():
    with pytest.raises(ConfigError, match=r"\['momentun'\].*'momentum'"):
        TourConfig.from_mapping({"momentun": 0.9})
    assert TourConfig.from_mapping({"variant": "soft"}).variant == "soft"


def test_a_weight_decay_that_would_grow_the_query_is_refused():
    TourConfig(lr=0.5, weight_decay=2)  # 1 - lr·wd = 0: the decay at its strongest
    with pytest.raises(ConfigError, match=r"lr × tour\.weight_decay must be <= 1, got 1\.0 × 100"):
        TourConfig(lr=1.0, weight_decay=100)
