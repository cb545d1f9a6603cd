"""TOUR gradients against torch autograd, one-step updates, and the Rocchio equality case."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from es_tour.tour import (
    hard_gradient,
    hard_step,
    pseudo_positives,
    rocchio,
    soft_gradient,
    soft_step,
)

SEEDS = [0, 1, 2, 3, 4]
# Only all k' equally labelled top docs together reach this mass.
ALL_TOP_MASS = 0.99


def random_problem(seed: int, k: int = 12, d: int = 8):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=d).astype(np.float32)
    C = rng.normal(size=(k, d)).astype(np.float32)
    phi = rng.normal(scale=2.0, size=k)
    return q, C, phi


def autograd_hard(q, C, phi, tau, p, scale=1.0) -> np.ndarray:
    positives = torch.as_tensor(pseudo_positives(phi, tau, p))
    q_t = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    log_p_k = torch.log_softmax(scale * (torch.tensor(C, dtype=torch.float64) @ q_t), dim=0)
    loss = -torch.logsumexp(log_p_k[positives], dim=0)
    loss.backward()
    return q_t.grad.numpy()


def autograd_soft(q, C, phi, tau, scale=1.0) -> np.ndarray:
    q_t = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    log_p_k = torch.log_softmax(scale * (torch.tensor(C, dtype=torch.float64) @ q_t), dim=0)
    p_phi = torch.softmax(torch.tensor(phi, dtype=torch.float64) / tau, dim=0)
    loss = torch.nn.functional.kl_div(log_p_k, p_phi, reduction="sum")
    loss.backward()
    return q_t.grad.numpy()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("tau", "p"), [(0.5, 0.5), (1.0, 0.8), (0.1, 0.3)])
def test_hard_gradient_matches_autograd(seed, tau, p):
    q, C, phi = random_problem(seed)
    np.testing.assert_allclose(
        hard_gradient(q, C, phi, tau, p), autograd_hard(q, C, phi, tau, p), atol=1e-6
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tau", [0.5, 1.0, 0.1])
def test_soft_gradient_matches_autograd(seed, tau):
    q, C, phi = random_problem(seed)
    np.testing.assert_allclose(
        soft_gradient(q, C, phi, tau), autograd_soft(q, C, phi, tau), atol=1e-6
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale", [0.5, 20.0])
def test_scaled_gradients_match_autograd_of_the_scaled_softmax(seed, scale):
    q, C, phi = random_problem(seed)
    np.testing.assert_allclose(hard_gradient(q, C, phi, 0.5, 0.5, scale),
                               autograd_hard(q, C, phi, 0.5, 0.5, scale), atol=1e-6)
    np.testing.assert_allclose(soft_gradient(q, C, phi, 0.5, scale),
                               autograd_soft(q, C, phi, 0.5, scale), atol=1e-6)


def test_scale_sharpens_a_near_uniform_retriever_softmax():
    # unit vectors with cosines 0.1 apart: at scale 1 P_k is near uniform and the step is
    # tiny; at 20 the step toward the labeler's choice is many times larger
    C = np.array([[1.0, 0.0], [0.995, 0.0998], [0.98, 0.199]])
    q, phi = np.array([1.0, 0.0]), np.array([0.0, 0.0, 5.0])
    small = np.linalg.norm(soft_gradient(q, C, phi, 0.5, 1.0))
    large = np.linalg.norm(soft_gradient(q, C, phi, 0.5, 20.0))
    assert large > 10 * small


@pytest.mark.parametrize("seed", SEEDS)
def test_hard_step_is_query_minus_lr_times_autograd(seed):
    q, C, phi = random_problem(seed)
    expected = q - 0.3 * autograd_hard(q, C, phi, 0.5, 0.5)
    stepped = hard_step(q, C, phi, lr=0.3)
    assert stepped.dtype == np.float32
    np.testing.assert_allclose(stepped, expected, atol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_soft_step_is_query_minus_lr_times_autograd(seed):
    q, C, phi = random_problem(seed)
    expected = q - 0.3 * autograd_soft(q, C, phi, 0.5)
    stepped = soft_step(q, C, phi, lr=0.3)
    assert stepped.dtype == np.float32
    np.testing.assert_allclose(stepped, expected, atol=1e-6)


def test_gradients_stay_finite_for_large_similarities():
    q, C, phi = random_problem(0)
    big_q = q * 1e4
    assert np.all(np.isfinite(hard_gradient(big_q, C, phi * 1e4)))
    assert np.all(np.isfinite(soft_gradient(big_q, C, phi * 1e4)))


def phi_with_top_k_prime_positive(k: int, k_prime: int) -> np.ndarray:
    """Equal high scores for the first k' docs, far lower for the rest.

    With p = ALL_TOP_MASS, H is then exactly C[:k'] with equal pseudo-label mass.
    """
    return np.where(np.arange(k) < k_prime, 10.0, -10.0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k_prime", [1, 3, 5])
def test_hard_step_equals_rocchio_when_retrieval_is_uniform_and_q_is_zero(seed, k_prime):
    # q = 0 gives equal sim to every candidate, so P_k and the weights over H are uniform:
    # step = lr (mean(C_H) - mean(C)) = lr (k - k')/k (mean(C_H) - mean(C_rest)).
    k, d, lr = 8, 6, 0.4
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(k, d))
    q = np.zeros(d)
    phi = phi_with_top_k_prime_positive(k, k_prime)
    assert list(pseudo_positives(phi, 0.5, ALL_TOP_MASS)) == list(range(k_prime))
    weight = lr * (k - k_prime) / k
    np.testing.assert_allclose(
        hard_step(q, C, phi, lr, p=ALL_TOP_MASS),
        rocchio(q, C, k_prime, alpha=1.0, beta=weight, gamma=weight),
        atol=1e-6,
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_hard_step_equals_rocchio_when_candidates_share_projection_on_q(seed):
    k, d, k_prime, lr = 10, 6, 4, 0.25
    rng = np.random.default_rng(seed)
    q = rng.normal(size=d)
    unit_q = q / np.linalg.norm(q)
    C = rng.normal(size=(k, d))
    C = C - np.outer(C @ unit_q, unit_q) + 0.7 * unit_q
    assert np.ptp(C @ q) < 1e-12
    phi = phi_with_top_k_prime_positive(k, k_prime)
    weight = lr * (k - k_prime) / k
    np.testing.assert_allclose(
        hard_step(q, C, phi, lr, p=ALL_TOP_MASS),
        rocchio(q, C, k_prime, alpha=1.0, beta=weight, gamma=weight),
        atol=1e-6,
    )


def test_rocchio_combines_query_and_relevant_and_non_relevant_means():
    q = np.array([1.0, 0.0])
    C = np.array([[2.0, 0.0], [0.0, 2.0], [4.0, 4.0], [0.0, 0.0]])
    expected = 0.5 * q + 2.0 * np.array([1.0, 1.0]) - 3.0 * np.array([2.0, 2.0])
    np.testing.assert_allclose(rocchio(q, C, 2, 0.5, 2.0, 3.0), expected)


def test_rocchio_with_every_result_relevant_has_no_negative_term():
    q = np.array([1.0, 0.0])
    C = np.array([[2.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(rocchio(q, C, 2, 1.0, 1.0, 5.0), [2.0, 1.0])


@pytest.mark.parametrize("k_prime", [0, 3])
def test_rocchio_rejects_k_prime_outside_one_to_k(k_prime):
    with pytest.raises(ValueError, match=str(k_prime)):
        rocchio(np.zeros(2), np.ones((2, 2)), k_prime, 1.0, 1.0, 1.0)


def test_gradient_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="phi"):
        soft_gradient(np.zeros(3), np.ones((4, 3)), np.zeros(5))
    with pytest.raises(ValueError, match="C must be"):
        hard_gradient(np.zeros(3), np.ones((4, 2)), np.zeros(4))
