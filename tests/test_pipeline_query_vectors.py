"""A search context's query vectors: one embedding a query, or the vector a request brought."""

from __future__ import annotations

import numpy as np

from es_tour.pipeline import SearchContext, Timings


class CountingEncoder:
    def __init__(self) -> None:
        self.calls = 0

    def encode_queries(self, texts):
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32)


async def test_the_query_is_embedded_once_a_request_so_round_0_never_waits_on_the_encoder():
    encoder = CountingEncoder()
    context = SearchContext(object(), "idx", encoder, None, query_vectors={})  # type: ignore[arg-type]
    first = await context.embed_query("q", Timings())
    again = await context.embed_query("q", Timings())  # the fallback after a deadline
    assert encoder.calls == 1 and np.array_equal(again, first)


async def test_a_vector_the_request_brought_is_used_as_is():
    encoder = CountingEncoder()
    given = np.array([0.5, 0.5, 0.0], dtype=np.float32)
    context = SearchContext(object(), "idx", encoder, None,  # type: ignore[arg-type]
                            query_vectors={"q": given})
    assert np.array_equal(await context.embed_query("q", Timings()), given)
    assert encoder.calls == 0


async def test_a_moved_vector_leaves_the_kept_one_as_it_was():
    context = SearchContext(object(), "idx", CountingEncoder(), None,  # type: ignore[arg-type]
                            query_vectors={})
    moved = await context.embed_query("q", Timings())
    moved += 1.0  # TOUR moves the vector it gets in place
    assert np.array_equal(await context.embed_query("q", Timings()), np.ones(3))
