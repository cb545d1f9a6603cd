"""QueryOptimizer: SGD with momentum, weight decay and linear learning-rate decay."""

from __future__ import annotations

import numpy as np

from es_tour.errors import EsTourError

from ._config import TourConfig
from ._losses import loss_for
from ._numerics import as_query_and_candidates, standardized


class QueryOptimizer:
    """Refines one query's vector across rounds; create a new one per query.

    Follows torch.optim.SGD (no dampening, no Nesterov) with a linear LambdaLR:
    g = grad + weight_decay q; buf = g on the first step, else momentum buf + g;
    q <- q - lr_t buf with lr_t = lr (1 - t / max_rounds), t = 0, 1, ...
    """

    def __init__(self, config: TourConfig) -> None:
        self.config = config
        self.loss = loss_for(config)
        self.rounds_taken = 0
        self._momentum_buffer: np.ndarray | None = None

    def loss_labels(self, phi: np.ndarray) -> np.ndarray:
        """phi as the pseudo-label softmax sees it: z-scored if the config standardizes."""
        return standardized(phi) if self.config.standardize else np.asarray(phi, np.float64)

    def gradient(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """dL/dq of the configured variant's loss: (d,) float64."""
        return self.loss.gradient(q, C, self.loss_labels(phi))

    def step(self, q: np.ndarray, C: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """The next query vector. q: (d,), C: (k, d), phi: (k,) -> (d,) float32."""
        config = self.config
        if self.rounds_taken >= config.max_rounds:
            raise EsTourError(f"QueryOptimizer already took max_rounds={config.max_rounds} steps")
        q64, _ = as_query_and_candidates(q, C, phi)
        decayed_gradient = self.gradient(q64, C, phi) + config.weight_decay * q64
        if self._momentum_buffer is None:
            self._momentum_buffer = decayed_gradient
        else:
            self._momentum_buffer = config.momentum * self._momentum_buffer + decayed_gradient
        lr_t = config.lr * (1 - self.rounds_taken / config.max_rounds)
        self.rounds_taken += 1
        return (q64 - lr_t * self._momentum_buffer).astype(np.float32)
