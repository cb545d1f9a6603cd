"""The final TOUR ranking: labeler score and retrieval score, blended."""

from __future__ import annotations

import numpy as np

from es_tour.errors import ConfigError


def _min_max(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector carries no ordering, so it becomes zeros."""
    spread = x.max() - x.min()
    if spread == 0:
        return np.zeros_like(x)
    return np.asarray((x - x.min()) / spread)


def final_scores(phi: np.ndarray, sim: np.ndarray, lam: float) -> np.ndarray:
    """lam * norm(phi) + (1 - lam) * norm(sim) over every doc seen; sort descending to rank.

    phi: (n,) labeler scores, sim: (n,) q . c -> (n,) float64. norm is min-max
    scaling to [0, 1] over these n docs; a constant vector normalises to zeros.
    """
    phi = np.asarray(phi, dtype=np.float64)
    sim = np.asarray(sim, dtype=np.float64)
    if phi.ndim != 1 or phi.shape != sim.shape:
        raise ConfigError(f"phi and sim must both be (n,), got {phi.shape} and {sim.shape}")
    if not 0 <= lam <= 1:
        raise ConfigError(f"lam must be in [0, 1], got {lam!r}")
    if phi.size == 0:
        return np.zeros(0, dtype=np.float64)
    return lam * _min_max(phi) + (1 - lam) * _min_max(sim)
