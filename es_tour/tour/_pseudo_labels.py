"""Pseudo-labels from labeler scores phi: their distribution and the hard positives."""

from __future__ import annotations

import numpy as np

from ._numerics import as_scores, softmax

# Lets a flat phi with p*k integral give exactly p*k positives despite summation rounding.
_MASS_TOLERANCE = 1e-12


def pseudo_label_distribution(phi: np.ndarray, tau: float = 0.5) -> np.ndarray:
    """P(c|q, phi) = softmax(phi / tau). phi: (k,) -> (k,) float64."""
    return softmax(as_scores(phi) / tau)


def pseudo_positives(phi: np.ndarray, tau: float = 0.5, p: float = 0.5) -> np.ndarray:
    """Indices of the hard pseudo-positive set H, in descending phi order.

    H is the smallest prefix of the results sorted by descending phi whose
    pseudo-label mass softmax(phi / tau) reaches p. phi: (k,) -> (|H|,) int64.
    Ties in phi keep their input (rank) order.
    """
    probs = pseudo_label_distribution(phi, tau)
    by_phi = np.argsort(-as_scores(phi), kind="stable")
    mass = np.cumsum(probs[by_phi])
    # searchsorted finds the first prefix reaching p; past the end (p = 1 with
    # rounding short of it) every result is a positive.
    size = min(int(np.searchsorted(mass, p - _MASS_TOLERANCE, side="left")) + 1, len(by_phi))
    return by_phi[:size].astype(np.int64)
