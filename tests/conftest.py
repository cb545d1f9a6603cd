"""What the unit tests share: a search context over a test's own fake engine, whose
labeler reads φ from a table and whose encoder gives every query one vector."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from es_tour.pipeline import SearchContext


class TableLabeler:
    """φ(q, d) from a fixed {doc id: score} table; counts the pairs it scored, and keeps
    the ids of the docs it scored."""

    name = "phi"

    def __init__(self, phi: Mapping[str, float]):
        self.phi = phi
        self.pairs_scored = 0
        self.scored: list[str] = []

    def score(self, query, docs, index=""):
        self.pairs_scored += len(docs)
        self.scored += [doc_id for doc_id, _ in docs]
        return np.array([self.phi[doc_id] for doc_id, _ in docs], dtype=np.float32)


class OneVectorEncoder:
    def __init__(self, vector: np.ndarray):
        self.vector = np.asarray(vector, dtype=np.float32)

    def encode_queries(self, texts):
        return np.tile(self.vector, (len(texts), 1))


class DeletesAKnnHit:
    """A fake engine mixin: the third doc of the first kNN is deleted before any fetch
    reads it, as in a search racing a delete."""

    deleted: str | None = None

    async def knn(self, index, vector, k, **kwargs):
        hits = await super().knn(index, vector, k, **kwargs)
        self.deleted = self.deleted or hits[2].id
        return hits

    async def docs_by_id(self, index, ids, **kwargs):
        return [hit for hit in await super().docs_by_id(index, ids, **kwargs)
                if hit.id != self.deleted]


FakeContext = Callable[[object, np.ndarray, Mapping[str, float]], SearchContext]


@pytest.fixture
def fake_context() -> FakeContext:
    """(engine, query vector, φ table) -> a SearchContext on index "idx"."""
    def make(engine: object, query: np.ndarray, phi: Mapping[str, float]) -> SearchContext:
        return SearchContext(engine, "idx", OneVectorEncoder(query), TableLabeler(phi))

    return make
