"""TOUR's two losses, one class each: the gradient, the pseudo-positives and the early stop
that belong to it. QueryOptimizer steps on whichever the config's variant names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ._config import TourConfig, check_variant
from ._gradients import hard_gradient, soft_gradient
from ._numerics import as_scores
from ._pseudo_labels import pseudo_positives


class Loss(Protocol):
    def gradient(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray: ...

    def positives(self, phi: np.ndarray) -> np.ndarray: ...

    def converged(self, phi: np.ndarray) -> bool: ...


@dataclass(frozen=True)
class HardLoss:
    """L_hard = -log Σ_{c∈H} P_k(c|q) over the nucleus H of pseudo-positives (Eq. 11)."""

    tau: float = 0.5
    p: float = 0.5
    scale: float = 1.0

    def gradient(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        return hard_gradient(q, C, phi, self.tau, self.p, self.scale)

    def positives(self, phi: np.ndarray) -> np.ndarray:
        return pseudo_positives(phi, self.tau, self.p)

    def converged(self, phi: np.ndarray) -> bool:
        """The top-1 (phi in rank order) is a pseudo-positive."""
        return bool(np.any(self.positives(phi) == 0))


@dataclass(frozen=True)
class SoftLoss:
    """L_soft = KL(softmax(φ/τ) || P_k(·|q)) (Eq. 13); with every doc labelled so far in
    the loss (`memory="all"`) it is ReFIT's distillation of the labeler into q."""

    tau: float = 0.5
    p: float = 0.5  # only names the positives a trace shows; the loss uses every doc
    scale: float = 1.0

    def gradient(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        return soft_gradient(q, C, phi, self.tau, self.scale)

    def positives(self, phi: np.ndarray) -> np.ndarray:
        return pseudo_positives(phi, self.tau, self.p)

    def converged(self, phi: np.ndarray) -> bool:
        """The top-1 (phi in rank order) has the highest phi; ties count as highest."""
        phi = as_scores(phi)
        return bool(phi[0] >= phi.max())


LOSSES: dict[str, type[HardLoss] | type[SoftLoss]] = {"hard": HardLoss, "soft": SoftLoss}


def should_stop(variant: str, phi: np.ndarray, tau: float = 0.5, p: float = 0.5) -> bool:
    """Whether TOUR stops refining, by the variant's loss: phi (k,) in rank order."""
    return LOSSES[check_variant(variant)](tau, p).converged(as_scores(phi))


def loss_for(config: TourConfig) -> Loss:
    """The loss the config's variant names, with its tau, p and scale."""
    return LOSSES[check_variant(config.variant)](config.tau, config.p, config.scale)
