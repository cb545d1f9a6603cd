"""Rankings kept for a caller's next page of the same search.

An application pages by sending the same search again with another `from`: without this,
each page runs every round again (two query embeddings and the rounds' engine calls) to cut
its page from the same ranking. Kept, a later page costs what the engine's own page does:
one round trip that fetches the page (with its total and aggregations).

A sidecar of one process keeps them in memory. The workers of `es-tour serve --workers N`
share theirs, in a cache (diskcache: SQLite) in the run's own directory, which only the
sidecar's user may read and which goes with the run: a later page reaches its ranking
whichever worker the kernel hands its connection to.

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
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import diskcache
import orjson
from cachetools import TTLCache

from es_tour.server._config import RANKING_TTL_S

if TYPE_CHECKING:
    from es_tour.server._options import Resolved
    from es_tour.server._request import SearchRequest
    from es_tour.server._rounds import Ranked

log = logging.getLogger("es_tour.server")

# per sidecar: each ranking is its window's ids, scores and round-by-round trace (its size
# at the recommended settings: docs/benchmarks/pages.md)
RANKINGS_MIB = 16
# a shared cache's wait for another worker's write, past which a page runs its rounds
SHARED_TIMEOUT_S = 0.05
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
    least recently used dropped first, each for `ttl_s`: in this process's memory, or,
    given `shared_dir`, in the cache there that the sidecar's other workers open too."""

    def __init__(self, ttl_s: float = RANKING_TTL_S, max_bytes: int = RANKINGS_MIB << 20,
                 shared_dir: Path | None = None):
        self._ttl_s = ttl_s
        self._memory: TTLCache[str, Ranked] | None = None
        self._shared: diskcache.Cache | None = None
        if shared_dir is None:
            self._memory = TTLCache(maxsize=max_bytes, ttl=ttl_s, getsizeof=ranking_bytes)
        else:
            self._shared = diskcache.Cache(str(shared_dir), size_limit=max_bytes,
                                           eviction_policy="least-recently-used",
                                           timeout=SHARED_TIMEOUT_S, statistics=False)

    @property
    def nbytes(self) -> int:
        if self._memory is not None:
            return int(self._memory.currsize)
        return int(self._on_shared("volume", 0))

    def get(self, key: str) -> Ranked | None:
        if self._memory is not None:
            return self._memory.get(key)
        found: Ranked | None = self._on_shared("get", None, key)
        return found

    def keep(self, key: str, ranked: Ranked) -> None:
        """Keep a full refinement's ranking: its ids, scores and trace, not the labelled
        docs' sources (the engine fetches each page). Never a round-0 fallback's or a
        degraded one, which the next page should try to better."""
        if ranked.fallback is not None or ranked.result.degraded:
            return
        result = ranked.result
        stripped = replace(ranked, result=replace(
            result, hits=[replace(hit, source={}) for hit in result.hits]))
        if self._memory is None:
            self._on_shared("set", None, key, stripped, expire=self._ttl_s)
            return
        try:
            self._memory[key] = stripped
        except ValueError:  # larger than the whole cache: not kept
            pass

    def forget(self, key: str) -> None:
        if self._memory is not None:
            self._memory.pop(key, None)
        else:
            self._on_shared("delete", None, key)

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()

    def __len__(self) -> int:
        if self._memory is not None:
            return len(self._memory)
        return int(self._on_shared("__len__", 0))

    def _on_shared(self, method: str, otherwise: Any, *args: Any, **kwargs: Any) -> Any:
        """The shared cache's `method`, or `otherwise` where that cache fails (another
        worker held it past the timeout, its disk is full): the search runs its rounds."""
        try:
            return getattr(self._shared, method)(*args, **kwargs)
        except (diskcache.Timeout, sqlite3.Error, OSError) as exc:
            log.warning("the kept rankings could not be read or written (%s); a later "
                        "page runs its rounds", exc)
            return otherwise


def window_fetched(window_ids: Sequence[str], hits: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a page fetched every doc of its window part (`window_ids`, by `_id`)."""
    found = {hit.get("_id") for hit in hits}
    return all(doc in found for doc in window_ids)
