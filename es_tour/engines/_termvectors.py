"""Term vectors: how the index analyses a text, and the terms and statistics of docs, each
read by single-doc `_termvectors` calls, which the `read` action group grants."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from es_tour.engines._types import TermStats

# single-doc _termvectors calls of one term_stats in flight at once
TERM_VECTOR_CONCURRENCY = 8


class TermVectors:
    """The term-vector reads of an engine adapter (`ClientEngine`), over its client."""

    _client: Any
    # the `_id` of a doc key a search of this view met (`KeyedSearches.known_id`)
    known_id: Callable[[str], str]

    async def analyzed_tokens(self, index: str, text: str, *, field: str = "text"
                              ) -> list[str]:
        """`text` as the index analyses `field`: its tokens, in order (what `_analyze` gives).
        Read from the term vectors of an artificial doc holding `text` in `field`, a
        single-doc `_termvectors` that the `read` action group grants, where `_analyze` is
        an admin action to OpenSearch Security."""
        if not text.strip():
            return []
        response = await self._client.termvectors(
            index=index, body={"doc": {field: text}, "fields": [field], "positions": True,
                               "offsets": True, "payloads": False,
                               "term_statistics": False, "field_statistics": False})
        terms = response.get("term_vectors", {}).get(field, {}).get("terms", {})
        placed = [(token.get("position", 0), token.get("start_offset", 0), term)
                  for term, stats in terms.items() for token in stats.get("tokens", ())]
        return [term for *_, term in sorted(placed)]

    async def term_stats(
        self,
        index: str,
        ids: Sequence[str],
        *,
        fields: Sequence[str] = ("title", "text"),
    ) -> TermStats:
        """Term vectors of `ids` with document frequencies: one `_termvectors` call per doc
        (the `read` action group grants it; OpenSearch Security checks `_mtermvectors` as
        a cluster action), TERM_VECTOR_CONCURRENCY at a time. A doc key is read by the
        `_id` this view met it with, and keeps its key in the answer."""
        tf: dict[str, dict[str, int]] = {}
        df: dict[str, int] = {}
        doc_count = 0
        unique = list(dict.fromkeys(ids))
        if not unique:
            return TermStats(tf, df, doc_count)
        limit = asyncio.Semaphore(TERM_VECTOR_CONCURRENCY)

        async def one(doc_id: str) -> Mapping[str, Any]:
            async with limit:  # a doc deleted meanwhile: found false
                return dict(await self._client.termvectors(
                    index=index, id=self.known_id(doc_id), fields=list(fields),
                    term_statistics=True,
                    field_statistics=True, positions=False, offsets=False, payloads=False))

        for doc_id, doc in zip(unique, await asyncio.gather(*map(one, unique)), strict=True):
            if not doc.get("found", False):
                continue
            counts = tf.setdefault(doc_id, {})
            for vector in doc.get("term_vectors", {}).values():
                doc_count = max(doc_count, int(vector["field_statistics"]["doc_count"]))
                for term, stats in vector["terms"].items():
                    counts[term] = counts.get(term, 0) + int(stats["term_freq"])
                    df[term] = max(df.get(term, 0), int(stats.get("doc_freq", 0)))
        return TermStats(tf, df, doc_count)
