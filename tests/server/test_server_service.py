"""The per-request context of an intercepted search."""

from __future__ import annotations

import numpy as np

from es_tour.pipeline import Timings
from es_tour.server._service import _GivenVector


class CountingEncoder:
    def __init__(self) -> None:
        self.calls = 0

    def encode_queries(self, texts):
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32)


async def test_the_query_is_embedded_once_a_request_so_round_0_never_waits_on_the_encoder():
    encoder = CountingEncoder()
    context = _GivenVector(object(), "idx", encoder, None)  # type: ignore[arg-type]
    first = await context.embed_query("q", Timings())
    again = await context.embed_query("q", Timings())  # the fallback after a deadline
    assert encoder.calls == 1 and again is first


async def test_a_vector_the_request_brought_is_used_as_is():
    encoder = CountingEncoder()
    given = np.array([0.5, 0.5, 0.0], dtype=np.float32)
    context = _GivenVector(object(), "idx", encoder, None, vector=given)  # type: ignore[arg-type]
    assert await context.embed_query("q", Timings()) is given and encoder.calls == 0
