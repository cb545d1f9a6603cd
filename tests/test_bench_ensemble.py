"""The ensemble bench's pure parts: each member's spread, and the two ways to standardise."""

from __future__ import annotations

import numpy as np

from es_tour.bench.ensemble import combine, spreads


def test_spread_is_the_mean_within_query_std() -> None:
    scores = {"q1": {"a": np.array([0.0, 2.0])}, "q2": {"a": np.array([1.0, 1.0])}}
    assert spreads(scores, ["a"]) == {"a": 0.5}


def test_per_query_and_by_spread_standardise_each_member_before_the_weights() -> None:
    scores = {"a": np.array([0.1, 0.2, 0.3]), "b": np.array([0.9, 0.8, 0.7])}
    per_query = combine(scores, ["a", "b"], [1.0, 1.0], "per query", {})
    np.testing.assert_allclose(per_query, [0.0, 0.0, 0.0], atol=1e-6)  # equal and opposite
    by_spread = combine(scores, ["a", "b"], [1.0, 0.5], "by spread", {"a": 0.1, "b": 0.2})
    np.testing.assert_allclose(by_spread, [1 + 0.5 * 4.5, 2 + 0.5 * 4.0, 3 + 0.5 * 3.5])
