"""Doc keys: pool legs that load no stored field, naming each hit by its `_seq_no`.

Loading each hit's `_id` (a stored field) is most of a search's cost, about 0.14 ms a hit
on two cores; `_seq_no` is a doc value, and unique among the live docs of one shard. A
search of a one-shard index asks for it alone, and the few docs a caller then shows are
named by their `_id`s (`doc_ids`), most of them met already by the search that read their
text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache

from es_tour.engines._batch import SearchBatch
from es_tour.engines._hits import read_hits
from es_tour.engines._types import Hit, Overview, doc_key, key_seq_no

# doc keys whose name a view remembers (a search's own view: one request's in the sidecar)
DOC_IDS_KEPT = 65536
# what names a doc in a hit, read from its stored fields: a hit that loads them shows each
# the doc has (Elasticsearch's `_ignored` too), and a keyed page's hits are given them
NAME_FIELDS = ("_id", "_routing", "_ignored")
# indices or aliases known to span several shards, remembered by every view
SHARDED_KEPT = 4096
# the names of the filters that tell `_scores_of` which doc a hit is
_NAMED = "_tour_id:"
# what a keyed search asks on top of its body: no stored field, each hit's `_seq_no`, no total
_KEYED = {"stored_fields": "_none_", "seq_no_primary_term": True, "track_total_hits": False}


class KeyedSearches:
    """The doc-key searches of an engine adapter (`ClientEngine`), over its batch."""

    _batch: SearchBatch
    # doc key -> its name (`hit_name`), for the keys this view's searches have met with it
    _doc_ids: LRUCache[str, dict[str, Any]]
    # indices (or aliases) whose searches span several shards, where a sequence number
    # names no single doc: their pool legs load `_id`s
    _sharded: LRUCache[str, bool]

    async def keyed_search(self, index: str, body: Mapping[str, Any],
                           overview: Overview | None = None) -> list[Hit]:
        """`body`'s hits with their scores, each named by its doc key: the search loads no
        stored field, its hits read `_seq_no` from doc values, and it counts no total but
        `overview`'s (`unsharded_search`). Where `index` spans several shards a sequence
        number names no single doc: the search is sent again loading `_id`s, and later ones
        load them at once."""
        hits = await self.unsharded_search(index, body, overview=overview)
        if hits is not None:
            return hits
        return read_hits(await self._batch.search(
            index, {**body, "_source": False, "track_total_hits": False}), None)

    async def unsharded_search(self, index: str, body: Mapping[str, Any],
                               other: str | None = None, *, named: str | None = None,
                               named_scores: bool = False,
                               overview: Overview | None = None) -> list[Hit] | None:
        """`body`'s hits named by doc keys, as `keyed_search` asks, each with the script
        field `other`, or the score of the named query `named`, as its `other_score`; None
        where `index` spans several shards (and from then on). `named_scores`: asked with
        the named queries' scores (`SearchBatch.search`), as `named` is. `overview`: the
        search counts the request's total too (its `keys`), and its answer is the
        overview's, even where it spans several shards."""
        if index in self._sharded:
            return None
        keyed = {**body, **_KEYED}
        if overview is not None:
            overview.asked = True
            del keyed["track_total_hits"]  # the request's own, or the engine's default
            keyed |= overview.keys
        answer = await self._batch.search(index, keyed,
                                          named_scores=named_scores or named is not None)
        if overview is not None:
            overview.answer = answer
        if answer.get("_shards", {}).get("total", 1) > 1:
            self._sharded[index] = True
            return None
        return read_hits(answer, None, keyed=True, other=other, named=named)

    async def _search_hits(self, index: str, body: Mapping[str, Any], vector_field: str | None,
                           fetched: str | None, ids: Sequence[str] | None, *,
                           keyed: bool = False) -> list[Hit]:
        """`body`'s hits, those of a search restricted to `ids` named as `ids` names them
        (a doc key, or an `_id`); `keyed`, each named by its doc key. Each hit brings its
        `_seq_no` too, a doc value: the view then knows the doc key a keyed leg will name
        that doc by (`known_id`)."""
        body = {**body, "seq_no_primary_term": True}
        return self.hits_as_asked(await self._batch.search(index, dict(body)), ids or (),
                                  vector_field, fetched, keyed=keyed)

    def hits_as_asked(self, answer: Mapping[str, Any], ids: Sequence[str],
                      vector_field: str | None = None, fetched: str | None = None, *,
                      keyed: bool = False) -> list[Hit]:
        """The hits of `answer`, a search restricted to `ids` (doc keys or `_id`s) whose
        hits carry their `_seq_no` where a key asked for them, each named as `ids` names
        it, or (`keyed`) by its doc key; the `_id` of each is remembered (`known_id`)."""
        self._learn_ids(answer)
        return read_hits(answer, vector_field, fetched, _keys_by_seq_no(ids), keyed=keyed)

    def _learn_ids(self, answer: Mapping[str, Any]) -> None:
        """Remember the name of each hit that came with its sequence number."""
        self._doc_ids.update(names_by_key(answer["hits"]["hits"]))

    def remember_name(self, doc: str, name: Mapping[str, Any]) -> None:
        """Know the name (`hit_name`) of the doc key `doc`, one an earlier fetch of the
        caller's met."""
        self._doc_ids[doc] = dict(name)

    def known_id(self, doc: str) -> str:
        """The `_id` of `doc` where this view has met it; `doc` itself otherwise (an `_id`,
        or a key no search of this view has resolved)."""
        name = self._doc_ids.get(doc)
        return doc if name is None else name["_id"]

    def known_name(self, doc: str) -> dict[str, Any] | None:
        """How a hit that loaded its stored fields names the doc key `doc` (`hit_name`),
        where this view has met it; None otherwise."""
        return self._doc_ids.get(doc)

    async def doc_ids(self, index: str, docs: Sequence[str]) -> list[str]:
        """The `_id` of each of `docs` (doc keys or `_id`s), in order: those this view has
        not met, in one search that loads their `_id`s alone. A doc deleted meanwhile keeps
        its key."""
        unknown = [doc for doc in dict.fromkeys(docs)
                   if key_seq_no(doc) is not None and doc not in self._doc_ids]
        if unknown:
            body = {"size": len(unknown), "_source": False, "seq_no_primary_term": True,
                    "track_total_hits": False, "query": ids_query(unknown)}
            self._learn_ids(await self._batch.search(index, body))
        return [self.known_id(doc) for doc in docs]

    async def _scores_of(self, index: str, query: Mapping[str, Any], ids: Sequence[str]
                         ) -> list[Hit]:
        """`query`'s scores of the docs of `ids` it matches, best first, read without
        loading a stored field. A doc key's hit names itself by its `_seq_no`; an `_id` is
        a named filter, and its hit names it in `matched_queries` (each hit is checked
        against every named filter: a doc key costs the engine far less)."""
        unique = list(dict.fromkeys(ids))
        keys = _keys_by_seq_no(unique)
        named = [doc for doc in unique if key_seq_no(doc) is None]
        wanted = [_named_doc(doc) for doc in named]
        if keys:
            wanted.append({"terms": {"_seq_no": list(keys)}})
        body = {"size": len(unique), "stored_fields": "_none_", "track_total_hits": False,
                "seq_no_primary_term": bool(keys),
                "query": {"bool": {"must": [query],
                                   "filter": [{"bool": {"should": wanted}}]}}}
        answer = await self._batch.search(index, body)
        by_name = {_NAMED + doc: doc for doc in named}
        hits = []
        for hit in answer["hits"]["hits"]:
            doc = next((by_name[name] for name in hit.get("matched_queries", ())
                        if name in by_name), keys.get(hit.get("_seq_no", -1)))
            if doc is not None:
                hits.append(Hit(doc, float(hit.get("_score") or 0.0), {}, None,
                                hit.get("_index")))
        return hits


def hit_name(hit: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a hit that name its doc (NAME_FIELDS) where it has them."""
    return {key: hit[key] for key in NAME_FIELDS if key in hit}


def names_by_key(hits: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Doc key -> name (`hit_name`) of each hit that came with its sequence number and
    `_id`."""
    return {doc_key(hit["_seq_no"]): hit_name(hit) for hit in hits
            if "_seq_no" in hit and "_id" in hit}


def ids_query(docs: Sequence[str]) -> dict[str, Any]:
    """A filter on the docs of `docs`: `_id`s, doc keys (by `_seq_no`), or both."""
    keys = _keys_by_seq_no(docs)
    ids = [doc for doc in docs if key_seq_no(doc) is None]
    if not keys:
        return {"ids": {"values": ids}}
    by_seq_no = {"terms": {"_seq_no": list(keys)}}
    if not ids:
        return by_seq_no
    return {"bool": {"should": [{"ids": {"values": ids}}, by_seq_no]}}


def constrained(query: Mapping[str, Any], filters: Sequence[Mapping[str, Any]]
                ) -> Mapping[str, Any]:
    """`query` keeping only the docs every one of `filters` matches; as it is without any."""
    return {"bool": {"must": [query], "filter": list(filters)}} if filters else query


def _named_doc(doc: str) -> dict[str, Any]:
    """A filter on one doc's `_id`, named for `_scores_of` to read back."""
    return {"ids": {"values": [doc], "_name": _NAMED + doc}}


def _keys_by_seq_no(docs: Iterable[str]) -> dict[int, str]:
    return {seq_no: doc for doc in docs if (seq_no := key_seq_no(doc)) is not None}
