"""TOUR losses' gradients with respect to the query, one-step updates, and Rocchio.

sim(q, c) = q . c; P_k(c|q) = softmax of scale * sim over the candidates (the paper's
scale is 1; a cosine retriever's softmax needs one to be far from uniform).
"""

from __future__ import annotations

import numpy as np

from es_tour.errors import ConfigError

from ._numerics import as_query_and_candidates, softmax
from ._pseudo_labels import pseudo_label_distribution, pseudo_positives


def hard_gradient(
    q: np.ndarray, C: np.ndarray, phi: np.ndarray, tau: float = 0.5, p: float = 0.5,
    scale: float = 1.0,
) -> np.ndarray:
    """dL_hard/dq with L_hard = -log sum_{c in H} P_k(c|q).

    q: (d,), C: (k, d), phi: (k,) -> (d,) float64. Equals
    scale (sum_i P_k(c_i|q) c_i - sum_{c in H} w_c c), w = softmax of scale sim over H.
    """
    q, C = as_query_and_candidates(q, C, phi)
    logits = scale * (C @ q)
    positives = pseudo_positives(phi, tau, p)
    positive_weights = softmax(logits[positives])
    return np.asarray(scale * (softmax(logits) @ C - positive_weights @ C[positives]))


def soft_gradient(
    q: np.ndarray, C: np.ndarray, phi: np.ndarray, tau: float = 0.5, scale: float = 1.0
) -> np.ndarray:
    """dL_soft/dq with L_soft = KL(P(.|q, phi) || P_k(.|q)).

    q: (d,), C: (k, d), phi: (k,) -> (d,) float64. Equals
    scale (sum_i P_k(c_i|q) c_i - sum_i P(c_i|q, phi) c_i).
    """
    q, C = as_query_and_candidates(q, C, phi)
    residual = softmax(scale * (C @ q)) - pseudo_label_distribution(phi, tau)
    return np.asarray(scale * (residual @ C))


def hard_step(
    q: np.ndarray, C: np.ndarray, phi: np.ndarray, lr: float, tau: float = 0.5, p: float = 0.5
) -> np.ndarray:
    """One plain gradient step on L_hard (generalised Rocchio, Eq. 11): (d,) float32."""
    q64 = np.asarray(q, dtype=np.float64)
    return (q64 - lr * hard_gradient(q64, C, phi, tau, p)).astype(np.float32)


def soft_step(
    q: np.ndarray, C: np.ndarray, phi: np.ndarray, lr: float, tau: float = 0.5
) -> np.ndarray:
    """One plain gradient step on L_soft (Eq. 13): (d,) float32."""
    q64 = np.asarray(q, dtype=np.float64)
    return (q64 - lr * soft_gradient(q64, C, phi, tau)).astype(np.float32)


def rocchio(
    q: np.ndarray, C: np.ndarray, k_prime: int, alpha: float, beta: float, gamma: float
) -> np.ndarray:
    """Rocchio (Eq. 6): alpha q + beta mean(C[:k']) - gamma mean(C[k':]).

    q: (d,), C: (k, d) in rank order, 1 <= k' <= k -> (d,) float32.
    With k' = k there are no non-relevant results and the last term is zero.
    """
    q, C = as_query_and_candidates(q, C)
    k = C.shape[0]
    if not 1 <= k_prime <= k:
        raise ConfigError(f"k_prime must be in [1, {k}], got {k_prime!r}")
    relevant = C[:k_prime].mean(axis=0)
    non_relevant = C[k_prime:].mean(axis=0) if k_prime < k else np.zeros_like(q)
    return np.asarray(alpha * q + beta * relevant - gamma * non_relevant, dtype=np.float32)
