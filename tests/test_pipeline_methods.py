"""Ranking rules of the pipeline's methods, over an exact in-memory vector store.

The store stands in for the engine's kNN only to check how methods order what it returns;
the engines themselves are tested in integration_tests.
"""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.engines import Hit
from es_tour.pipeline import SearchContext, build_method

rng = np.random.default_rng(7)
DOCS = rng.normal(size=(200, 16)).astype(np.float32)
DOCS /= np.linalg.norm(DOCS, axis=1, keepdims=True)
# φ prefers a direction the query only partly shares, so TOUR has somewhere to move
TARGET = DOCS[:5].mean(axis=0)
PHI = {f"d{i}": float(v) for i, v in enumerate(DOCS @ TARGET)}


class ExactStore:
    """Exact inner-product kNN that records the query vectors it was sent."""

    name = "exact"

    def __init__(self) -> None:
        self.sent: list[np.ndarray] = []
        self.returned: list[str] = []

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.sent.append(np.asarray(vector))
        self.returned.append(returns)
        order = np.argsort(-(DOCS @ vector), kind="stable")[:k]
        with_vectors = returns == "vectors"
        return [Hit(f"d{i}", float(DOCS[i] @ vector),
                    {"title": f"d{i}", **({"embedding": DOCS[i]} if with_vectors else {})},
                    DOCS[i] if with_vectors else None) for i in order]


class TargetLabeler:
    name = "target"
    pairs_scored = 0

    def score(self, query, docs, index=""):
        return np.array([PHI[doc_id] for doc_id, _ in docs], dtype=np.float32)


class QueryEncoder:
    def encode_queries(self, texts):
        return (DOCS[100:101] + 0.3 * TARGET).astype(np.float32)


@pytest.fixture
def context() -> SearchContext:
    return SearchContext(ExactStore(), "idx", QueryEncoder(), TargetLabeler())


async def test_rerank_orders_its_window_by_phi_and_keeps_the_tail_in_knn_order(context):
    knn = await build_method("knn", context).search("q", 50)
    reranked = await build_method("rerank", context, {"k": 10}).search("q", 50)
    window = [h.id for h in knn.hits[:10]]
    assert [h.id for h in reranked.hits[:10]] == sorted(window, key=lambda d: -PHI[d])
    assert [h.id for h in reranked.hits[10:]] == [h.id for h in knn.hits[10:]]
    assert reranked.pairs_scored == 10


@pytest.mark.parametrize("method", ["tour-soft", "rocchio"])
async def test_tour_returns_what_its_last_round_ranked_and_fills_the_depth(context, method):
    result = await build_method(method, context, {"k": 10, "max_rounds": 3}
                                if method != "rocchio" else {"k": 10}).search("q", 50)
    assert len(result.rounds) > 1
    ranking = result.rounds[-1].details["ranking"]
    labelled = {d for r in result.rounds for d in r.details["top_ids"]}
    assert set(ranking) == labelled
    # every labelled doc ranks above every doc the labeler never saw, which fill the depth
    assert [h.id for h in result.hits[: len(ranking)]] == ranking
    assert len(result.hits) == 50 and len({h.id for h in result.hits}) == 50
    # rounds fetch vectors for k docs; only the one call below them skips the vectors
    assert context.engine.returned == ["vectors"] * len(result.rounds) + ["text"]
    assert result.engine_calls == len(result.rounds) + 1


async def test_query_vectors_reach_the_engine_at_unit_length(context):
    await build_method("tour-soft", context, {"k": 10, "max_rounds": 3}).search("q")
    assert len(context.engine.sent) > 1
    assert np.allclose([np.linalg.norm(v) for v in context.engine.sent], 1.0, atol=1e-5)
