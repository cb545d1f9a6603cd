"""Typed results of a search method: hits, a round-by-round trace, costs and timings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timings:
    """Milliseconds spent in the engine, in the models, and in es-tour's own code."""

    engine_ms: float = 0.0
    model_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def own_ms(self) -> float:
        return max(self.total_ms - self.engine_ms - self.model_ms, 0.0)

    def engine(self) -> AbstractContextManager[None]:
        return self._clock("engine_ms")

    def model(self) -> AbstractContextManager[None]:
        return self._clock("model_ms")

    @contextmanager
    def _clock(self, attribute: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(
                self, attribute, getattr(self, attribute) + (time.perf_counter() - start) * 1000
            )

    def to_dict(self) -> dict[str, float]:
        return {
            "engine_ms": round(self.engine_ms, 3),
            "model_ms": round(self.model_ms, 3),
            "own_ms": round(self.own_ms, 3),
            "total_ms": round(self.total_ms, 3),
        }


@dataclass(frozen=True)
class RankedHit:
    """A document in a method's final ranking."""

    id: str
    score: float
    source: dict[str, Any] = field(default_factory=dict)


@dataclass
class RoundTrace:
    """What one round did. `details` holds method-specific facts (Δq norm, the query, …)."""

    round: int
    retrieved: int
    newly_scored: int
    timings: Timings = field(default_factory=Timings)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "retrieved": self.retrieved,
            "newly_scored": self.newly_scored,
            **self.timings.to_dict(),
            **self.details,
        }


@dataclass
class SearchResult:
    """The final ranking of one query by one method, with its trace and costs."""

    method: str
    hits: list[RankedHit]
    rounds: list[RoundTrace]
    pairs_scored: int
    engine_calls: int
    timings: Timings
    parameters: dict[str, Any] = field(default_factory=dict)
    degraded: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parameters": self.parameters,
            "pairs_scored": self.pairs_scored,
            "engine_calls": self.engine_calls,
            "degraded": self.degraded,
            "timings": self.timings.to_dict(),
            "rounds": [r.to_dict() for r in self.rounds],
        }
