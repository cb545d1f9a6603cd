"""LabelCache: labeler scores phi(q, doc) kept per query so each doc is labelled once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from es_tour.errors import ConfigError


class LabelCache:
    """Maps doc id -> phi for one query; counts hits and misses in `missing`."""

    def __init__(self) -> None:
        self._scores: dict[str, float] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._scores)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._scores

    def missing(self, ids: Iterable[str]) -> list[str]:
        """Ids without a cached score, de-duplicated in first-seen order.

        Each distinct id counts once, as a hit if cached and a miss if not.
        """
        unique_ids = list(dict.fromkeys(ids))
        absent = [doc_id for doc_id in unique_ids if doc_id not in self._scores]
        self.misses += len(absent)
        self.hits += len(unique_ids) - len(absent)
        return absent

    def update(self, ids: Sequence[str], scores: Sequence[float] | np.ndarray) -> None:
        """Store scores: (n,) for ids: (n,)."""
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if len(ids) != len(scores):
            raise ConfigError(f"got {len(ids)} ids but {len(scores)} scores")
        self._scores.update(zip(ids, scores.tolist(), strict=True))

    def top(self, n: int) -> list[str]:
        """The n ids with the highest phi, in descending phi (first labelled first on ties)."""
        return sorted(self._scores, key=lambda doc_id: -self._scores[doc_id])[:n]

    def get(self, ids: Sequence[str]) -> np.ndarray:
        """Cached scores for ids: (n,) float64; KeyError names any id never labelled."""
        absent = [doc_id for doc_id in ids if doc_id not in self._scores]
        if absent:
            raise KeyError(f"no cached label for ids {absent}")
        return np.array([self._scores[doc_id] for doc_id in ids], dtype=np.float64)
