"""Rankings kept for a caller's next page of the same search.

An application pages by sending the same search again with another `from`: without this,
each page runs every round again (two query embeddings and the rounds' engine calls) to cut
its page from the same ranking. Kept, a later page costs what the engine's own page does:
one round trip that fetches the page (with its total and aggregations).

Each worker keeps its own: a later page reaches the ranking on the worker that made it
(a kept-alive connection stays on one worker), and runs its rounds on another.

A ranking is kept per caller (a digest of its identity headers), per index (its
`index.uuid`) and per search: its body and URL parameters less `from` and `size`, and the
method and options it resolved to. So no caller ever reads another's ranking, a settings
change is another search, and an index recreated under the same name is another index. A
kept ranking lives `ttl_s`; its page is still fetched by the engine as the caller, so a doc
deleted or rewritten meanwhile makes the sidecar refine the search again rather than show
a page without it (`RankingCache.forget`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson
from cachetools import TTLCache

from es_tour.server._config import RANKING_TTL_S

if TYPE_CHECKING:
    from es_tour.server._options import Resolved
    from es_tour.server._request import SearchRequest
    from es_tour.server._rounds import Ranked

# per worker: each ranking is its window's ids, scores and round-by-round trace (about
# 19 KB at the recommended settings: docs/benchmarks/pages.md)
RANKINGS_MIB = 16
# what a later page of the same search changes
PAGE_KEYS = ("from", "size")


def ranking_key(caller: str, uuid: str, request: SearchRequest, chosen: Resolved) -> str:
    """The digest naming one caller's search of one index, whatever page it asks."""
    search = {
        "body": {key: value for key, value in request.body.items() if key not in PAGE_KEYS},
        "params": dict(request.params), "text": request.text, "tour": request.tour,
        "vector": request.vector, "vector_field": request.vector_field,
        "method": chosen.method, "options": chosen.options, "labeler": chosen.labeler,
        "encoder": chosen.encoder, "fields": [chosen.vector_field, *chosen.text_fields],
        "window": chosen.window}
    encoded = orjson.dumps([caller, uuid, search], default=str,
                           option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY
                           | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(encoded).hexdigest()


def ranking_bytes(ranked: Ranked) -> int:
    """About what a kept ranking holds: its JSON size (ids, scores, trace)."""
    return len(orjson.dumps(ranked, default=str, option=orjson.OPT_SERIALIZE_NUMPY
                            | orjson.OPT_NON_STR_KEYS))


class RankingCache:
    """The rankings of full refinements, at most `max_bytes` of them (`ranking_bytes`),
    least recently used dropped first, each for `ttl_s`."""

    def __init__(self, ttl_s: float = RANKING_TTL_S, max_bytes: int = RANKINGS_MIB << 20):
        self._kept: TTLCache[str, Ranked] = TTLCache(maxsize=max_bytes, ttl=ttl_s,
                                                     getsizeof=ranking_bytes)

    @property
    def nbytes(self) -> int:
        return int(self._kept.currsize)

    def get(self, key: str) -> Ranked | None:
        return self._kept.get(key)

    def keep(self, key: str, ranked: Ranked) -> None:
        """Keep a full refinement's ranking: its ids, scores and trace, not the labelled
        docs' sources (the engine fetches each page). Never a round-0 fallback's or a
        degraded one, which the next page should try to better."""
        if ranked.fallback is None and not ranked.result.degraded:
            result = ranked.result
            try:
                self._kept[key] = replace(ranked, result=replace(
                    result, hits=[replace(hit, source={}) for hit in result.hits]))
            except ValueError:  # larger than the whole cache: not kept
                pass

    def forget(self, key: str) -> None:
        self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)


def window_fetched(window_ids: Sequence[str], hits: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a page fetched every doc of its window part (`window_ids`, by `_id`)."""
    found = {hit.get("_id") for hit in hits}
    return all(doc in found for doc in window_ids)
