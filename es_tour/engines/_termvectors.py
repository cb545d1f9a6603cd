"""Term vectors: how the index analyses a text, by a single-doc `_termvectors` call, which
the `read` action group grants; and the terms and statistics of docs, in one
`_mtermvectors` call, or single-doc calls where the engine refuses the caller that."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from es_tour.engines._types import TermStats

# single-doc _termvectors calls of one term_stats in flight at once
TERM_VECTOR_CONCURRENCY = 8
# what term_stats reads of each doc: its terms' frequencies and the index's statistics
_STATS_ONLY = {"term_statistics": True, "field_statistics": True, "positions": False,
               "offsets": False, "payloads": False}


class TermVectors:
    """The term-vector reads of an engine adapter (`ClientEngine`), over its client."""

    _client: Any
    # a multi-doc call's answer, None where refused (`MultiSearch.unless_refused`)
    unless_refused: Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]
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
        """Term vectors of `ids` with document frequencies, in one `_mtermvectors` call.
        Elasticsearch's `read` privilege grants it; OpenSearch Security checks it as a
        cluster action, which a reader of one index may lack: an identity the engine
        refused it is sent one `_termvectors` call per doc (which `read` grants),
        TERM_VECTOR_CONCURRENCY at a time, and remembered a while, so that it is not asked
        again. A doc key is read by the `_id` this view met it with, and keeps its key in
        the answer."""
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
                    index=index, id=self.known_id(doc_id), fields=list(fields), **_STATS_ONLY))

        docs = await self._multi_term_vectors(index, unique, fields)
        if docs is None:
            docs = list(await asyncio.gather(*map(one, unique)))
        # a doc the engine failed to read gets a call of its own, and its own error
        failed = [i for i, doc in enumerate(docs) if "error" in doc]
        for i, doc in zip(failed, await asyncio.gather(*(one(unique[i]) for i in failed)),
                          strict=True):
            docs[i] = doc
        for doc_id, doc in zip(unique, docs, strict=True):
            if not doc.get("found", False):
                continue
            counts = tf.setdefault(doc_id, {})
            for vector in doc.get("term_vectors", {}).values():
                doc_count = max(doc_count, int(vector["field_statistics"]["doc_count"]))
                for term, stats in vector["terms"].items():
                    counts[term] = counts.get(term, 0) + int(stats["term_freq"])
                    df[term] = max(df.get(term, 0), int(stats.get("doc_freq", 0)))
        return TermStats(tf, df, doc_count)

    async def _multi_term_vectors(self, index: str, ids: Sequence[str],
                                  fields: Sequence[str]) -> list[Mapping[str, Any]] | None:
        """Each doc of `ids`' term vectors, in order (the engine answers in an order of its
        own), from one `_mtermvectors`; None where the engine refuses it to this identity,
        now or within the last while."""
        named = [self.known_id(doc) for doc in ids]
        answer = await self.unless_refused("_mtermvectors", lambda: self._client.mtermvectors(
            index=index, body={"ids": named,
                               "parameters": {"fields": list(fields), **_STATS_ONLY}}))
        if answer is None:
            return None
        by_id = {doc.get("_id"): dict(doc) for doc in answer["docs"]}
        return [by_id.get(doc_id, {"found": False}) for doc_id in named]
