"""Shared numeric helpers: a stable softmax and shape checks."""

from __future__ import annotations

import numpy as np

from es_tour.errors import ConfigError


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax of x: (n,) -> (n,) float64; the max is subtracted so exp cannot overflow."""
    x = np.asarray(x, dtype=np.float64)
    shifted = np.exp(x - x.max())
    return np.asarray(shifted / shifted.sum())


def standardized(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std: (n,) -> (n,) float64; a constant vector carries no ordering, so
    it becomes zeros."""
    x = np.asarray(x, dtype=np.float64)
    spread = x.std()
    if spread == 0:
        return np.zeros_like(x)
    return np.asarray((x - x.mean()) / spread)


def as_scores(phi: np.ndarray, name: str = "phi") -> np.ndarray:
    """phi as a non-empty (k,) float64 array."""
    phi = np.asarray(phi, dtype=np.float64)
    if phi.ndim != 1 or phi.size == 0:
        raise ConfigError(f"{name} must be a non-empty (k,) array, got shape {phi.shape}")
    return phi


def as_query_and_candidates(
    q: np.ndarray, C: np.ndarray, phi: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """q: (d,) and C: (k, d) as float64, checked against each other and against phi: (k,)."""
    q = np.asarray(q, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    if q.ndim != 1:
        raise ConfigError(f"q must be a (d,) vector, got shape {q.shape}")
    if C.ndim != 2 or C.shape[0] == 0 or C.shape[1] != q.shape[0]:
        raise ConfigError(f"C must be a non-empty (k, {q.shape[0]}) matrix, got shape {C.shape}")
    if phi is not None and np.shape(phi) != (C.shape[0],):
        raise ConfigError(f"phi must have shape ({C.shape[0]},) to match C, got {np.shape(phi)}")
    return q, C
