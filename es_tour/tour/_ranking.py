"""Final rankings: the labeler score blended with retrieval scores."""

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


def _z(x: np.ndarray) -> np.ndarray:
    """Zero mean, unit spread over the pool; a constant vector carries no ordering: zeros."""
    spread = x.std()
    if spread == 0:
        return np.zeros_like(x)
    return np.asarray((x - x.mean()) / spread)


def fused_scores(phi: np.ndarray, bm25: np.ndarray, dense: np.ndarray, w_bm25: float,
                 w_dense: float) -> np.ndarray:
    """z(φ) + w_bm25·z(BM25) + w_dense·z(q0·c) over one query's labelled pool.

    phi, bm25, dense: (n,) -> (n,) float64. z-scoring per query puts a cosine labeler's
    narrow φ and a cross-encoder's logits on one scale, so the weights carry over.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in (phi, bm25, dense)]
    if any(a.ndim != 1 or a.shape != arrays[0].shape for a in arrays):
        raise ConfigError("phi, bm25 and dense must all be (n,), got "
                          f"{[a.shape for a in arrays]}")
    return _z(arrays[0]) + w_bm25 * _z(arrays[1]) + w_dense * _z(arrays[2])


def hybrid_scores(bm25: np.ndarray, dense: np.ndarray, lexical_weight: float) -> np.ndarray:
    """lexical_weight·z(BM25) + (1 − lexical_weight)·z(q·c) over one query's union of BM25
    and kNN hits: the convex combination of normalised scores that Bruch et al. (2023)
    found to beat RRF, and it needs no labels.

    bm25, dense: (n,) -> (n,) float64; BM25 is 0 for a doc no query term matches. `dense`
    may be any affine map of q·c (the engine's kNN score): z-scoring undoes it.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in (bm25, dense)]
    if any(a.ndim != 1 for a in arrays) or arrays[0].shape != arrays[1].shape:
        raise ConfigError(f"bm25 and dense must both be (n,), got "
                          f"{[a.shape for a in arrays]}")
    if not 0 <= lexical_weight <= 1:
        raise ConfigError(f"lexical_weight must be in [0, 1], got {lexical_weight!r}")
    return lexical_weight * _z(arrays[0]) + (1 - lexical_weight) * _z(arrays[1])
