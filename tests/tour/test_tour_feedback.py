"""Qdrant's naive relevance-feedback formula: its pairs, its scores, and its one vector."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.errors import ConfigError
from es_tour.tour import feedback_pairs, feedback_query, feedback_scores

rng = np.random.default_rng(3)


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_pairs_join_the_ith_best_with_the_ith_worst_at_most_three():
    phi = np.array([0.2, 0.9, 0.5, 0.1, 0.7, 0.4, 0.3, 0.8])
    pairs = feedback_pairs(phi)
    # by φ: 1 (0.9), 7 (0.8), 4 (0.7), 2, 5, 6, 0, 3 (0.1)
    assert [(pos, neg) for pos, neg, _ in pairs] == [(1, 3), (7, 0), (4, 6)]
    assert [conf for _, _, conf in pairs] == pytest.approx([0.8, 0.6, 0.4])


def test_pairs_are_at_most_half_the_feedback_and_none_from_one_doc():
    assert len(feedback_pairs(np.array([0.3, 0.2, 0.1]), max_pairs=5)) == 1
    assert feedback_pairs(np.array([0.5])) == []
    with pytest.raises(ConfigError):
        feedback_pairs(np.array([0.5, 0.1]), max_pairs=0)


def test_pairs_of_equal_scores_keep_the_order_given():
    assert feedback_pairs(np.zeros(4), max_pairs=2) == [(0, 3, 0.0), (1, 2, 0.0)]


def test_scores_follow_the_formula_term_by_term():
    q, C, X = unit(rng.normal(size=8)), unit(rng.normal(size=(4, 8))), rng.normal(size=(5, 8))
    phi = np.array([0.1, 0.9, 0.6, 0.3])  # pairs: (1, 0) with 0.8, (2, 3) with 0.3
    a, b, c = 0.7, 2.0, 1.5
    expected = (a * X @ q + 0.8 ** b * c * (X @ C[1] - X @ C[0])
                + 0.3 ** b * c * (X @ C[2] - X @ C[3]))
    assert feedback_scores(q, C, phi, X, a, b, c) == pytest.approx(expected)


def test_the_feedback_vector_scores_every_doc_as_the_formula_does():
    q, C, X = unit(rng.normal(size=16)), unit(rng.normal(size=(10, 16))), unit(
        rng.normal(size=(50, 16)))
    phi = rng.normal(size=10)
    vector = feedback_query(q, C, phi, 1.0, 0.5, 0.8)
    assert X @ vector == pytest.approx(feedback_scores(q, C, phi, X, 1.0, 0.5, 0.8), abs=1e-5)


def test_a_positive_example_pulls_a_doc_like_it_above_the_querys_nearest():
    q = np.array([1.0, 0.0, 0.0])
    near_query = np.array([0.9, 0.0, 0.436])  # the query's nearest, like the negative
    near_positive = np.array([0.8, 0.6, 0.0])  # less like q, like the positive
    C = np.array([[0.6, 0.8, 0.0], [0.6, 0.0, 0.8]])  # labelled: a positive and a negative
    phi = np.array([0.9, 0.1])
    X = np.stack([near_query, near_positive])
    assert np.argmax(X @ q) == 0
    scores = feedback_scores(q, C, phi, X, a=1.0, b=1.0, c=1.0)
    assert np.argmax(scores) == 1  # the feedback reorders what q alone ranks
    # and the moved vector leans toward the positive, away from the negative
    moved = feedback_query(q, C, phi, 1.0, 1.0, 1.0)
    assert moved @ C[0] > q @ C[0] and moved @ C[1] < q @ C[1]


def test_without_feedback_weight_the_query_ranks_alone():
    q, C, X = unit(rng.normal(size=8)), unit(rng.normal(size=(6, 8))), rng.normal(size=(20, 8))
    phi = rng.normal(size=6)
    scores = feedback_scores(q, C, phi, X, a=2.0, b=1.0, c=0.0)
    assert scores == pytest.approx(2.0 * X @ q)
    assert feedback_query(q, C[:1], phi[:1], 1.0, 1.0, 5.0) == pytest.approx(q)
