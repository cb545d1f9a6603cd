"""Qdrant's naive relevance-feedback formula (Qdrant 1.17's Relevance Feedback Query).

From https://qdrant.tech/documentation/search/search-relevance/#naive-strategy: a
candidate x is scored

    score(x) = a·sim(q, x) + Σ_pairs confidence^b · c · (sim(pos, x) − sim(neg, x))

where each pair joins a labelled doc the feedback model scored higher (pos) with one it
scored lower (neg), and confidence = φ(pos) − φ(neg). The pairs, as Qdrant's engine forms
them (`feedback_query.rs` in github.com/qdrant/qdrant, `lib/segment/src/vector_storage/
query/`): the feedback sorted by φ, best first; the best joined with the worst, the second
best with the second worst, and so on, at most `max_pairs` (Qdrant's default: 3) and at
most half the feedback.

With sim the inner product, every term is linear in x, so the formula is one vector:
score(x) = x · (a q + Σ c·confidence^b·(pos − neg)). `feedback_query` gives that vector,
which an inner-product kNN search ranks the whole index by; `feedback_scores` is the
formula as written, for any candidates, and the two agree.
"""

from __future__ import annotations

import numpy as np

from es_tour.errors import ConfigError

from ._numerics import as_query_and_candidates

QDRANT_MAX_PAIRS = 3  # DEFAULT_MAX_PAIRS of Qdrant's FeedbackQuery


def feedback_pairs(phi: np.ndarray, max_pairs: int = QDRANT_MAX_PAIRS
                   ) -> list[tuple[int, int, float]]:
    """(positive index, negative index, confidence) of each pair, most confident first.

    phi: (k,) feedback scores. The i-th best by φ (ties: first given first) is paired with
    the i-th worst, for i < min(max_pairs, k // 2); confidence = φ[pos] − φ[neg] ≥ 0.
    """
    phi = np.asarray(phi, dtype=np.float64).reshape(-1)
    if max_pairs < 1:
        raise ConfigError(f"max_pairs must be at least 1, got {max_pairs!r}")
    order = np.argsort(-phi, kind="stable")
    count = min(max_pairs, len(order) // 2)
    return [(int(order[i]), int(order[-1 - i]), float(phi[order[i]] - phi[order[-1 - i]]))
            for i in range(count)]


def _pair_weights(pairs: list[tuple[int, int, float]], b: float, c: float) -> np.ndarray:
    """c · confidence^b per pair: (p,) float64."""
    return np.array([c * confidence ** b for _, _, confidence in pairs], dtype=np.float64)


def feedback_query(q: np.ndarray, C: np.ndarray, phi: np.ndarray, a: float, b: float,
                   c: float, max_pairs: int = QDRANT_MAX_PAIRS) -> np.ndarray:
    """The vector whose inner product with a doc is its naive feedback score.

    q: (d,) the query, C: (k, d) the labelled docs' vectors, phi: (k,) their feedback
    scores -> (d,) float32 = a q + Σ_pairs c·confidence^b·(C[pos] − C[neg]). Fewer than
    two labelled docs make no pair: a q.
    """
    q, C = as_query_and_candidates(q, C, phi)
    pairs = feedback_pairs(phi, max_pairs)
    moved = a * q
    for (pos, neg, _), weight in zip(pairs, _pair_weights(pairs, b, c), strict=True):
        moved += weight * (C[pos] - C[neg])
    return moved.astype(np.float32)


def feedback_scores(q: np.ndarray, C: np.ndarray, phi: np.ndarray, X: np.ndarray, a: float,
                    b: float, c: float, max_pairs: int = QDRANT_MAX_PAIRS) -> np.ndarray:
    """The naive formula term by term, with sim the inner product.

    q: (d,), C: (k, d) labelled docs, phi: (k,) their feedback scores, X: (m, d)
    candidates -> (m,) float64 scores; higher ranks first.
    """
    q, C = as_query_and_candidates(q, C, phi)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != q.shape[0]:
        raise ConfigError(f"X must be (m, {q.shape[0]}), got {X.shape}")
    pairs = feedback_pairs(phi, max_pairs)
    scores = a * (X @ q)
    for (pos, neg, _), weight in zip(pairs, _pair_weights(pairs, b, c), strict=True):
        scores += weight * (X @ C[pos] - X @ C[neg])
    return np.asarray(scores)
