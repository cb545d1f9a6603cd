"""TOUR (Sung et al. 2023): test-time optimisation of dense query vectors, and Qdrant's
naive relevance-feedback formula. Pure numpy."""

from __future__ import annotations

from ._cache import LabelCache
from ._config import (
    DEFAULT_VARIANT,
    MAX_K,
    MAX_ROUNDS,
    MEMORIES,
    STOP_RULES,
    VARIANTS,
    TourConfig,
    check_variant,
)
from ._feedback import QDRANT_MAX_PAIRS, feedback_pairs, feedback_query, feedback_scores
from ._gradients import hard_gradient, hard_step, rocchio, soft_gradient, soft_step
from ._losses import LOSSES, HardLoss, Loss, SoftLoss, loss_for, should_stop
from ._numerics import standardized
from ._optimizer import QueryOptimizer
from ._pseudo_labels import pseudo_label_distribution, pseudo_positives
from ._ranking import final_scores, fused_scores, hybrid_scores

__all__ = [
    "DEFAULT_VARIANT",
    "LOSSES",
    "MAX_K",
    "MAX_ROUNDS",
    "MEMORIES",
    "QDRANT_MAX_PAIRS",
    "STOP_RULES",
    "VARIANTS",
    "HardLoss",
    "LabelCache",
    "Loss",
    "QueryOptimizer",
    "SoftLoss",
    "TourConfig",
    "check_variant",
    "feedback_pairs",
    "feedback_query",
    "feedback_scores",
    "final_scores",
    "fused_scores",
    "hard_gradient",
    "hard_step",
    "hybrid_scores",
    "loss_for",
    "pseudo_label_distribution",
    "pseudo_positives",
    "rocchio",
    "should_stop",
    "soft_gradient",
    "soft_step",
    "standardized",
]
