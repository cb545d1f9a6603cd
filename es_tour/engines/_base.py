"""What Elasticsearch and OpenSearch share: the query DSL, bulk, settings, docs by id and
term vectors.

Every call a search makes for a caller is one that the `read` action group on the index
grants (a search, or one doc's `_termvectors`): never `_mget`, `_mtermvectors` or
`_analyze`, which OpenSearch Security checks as cluster or admin actions.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from cachetools import LRUCache, TTLCache

from es_tour.engines._batch import MultiSearch
from es_tour.engines._hits import first_of_each, read_hits, source_value
from es_tour.engines._hybrid import HybridLegs
from es_tour.engines._json import wire_vector
from es_tour.engines._keys import (
    DOC_IDS_KEPT,
    SHARDED_KEPT,
    KeyedSearches,
    constrained,
    ids_query,
)
from es_tour.engines._termvectors import TermVectors
from es_tour.engines._types import (
    BulkReport,
    Hit,
    IndexSpec,
    KnnReturns,
    Overview,
    VectorField,
    key_seq_no,
)
from es_tour.engines._vectors import StoredVectors
from es_tour.errors import ConfigError, EngineError, EngineSetupError, UpstreamError

_BULK_CHUNK = 500


# refusals of a multi-doc endpoint kept, and for how long (a role may be granted it meanwhile)
REFUSALS_KEPT = 4096
REFUSAL_TTL_S = 300.0

# the mark es-tour leaves in the mappings of the indices it creates
CREATED_BY = {"created_by": "es-tour"}

class ClientEngine(MultiSearch, TermVectors, KeyedSearches, HybridLegs, StoredVectors):
    """Engine adapter over an official async client; subclasses supply the vector dialect."""

    name = "engine"

    def __init__(
        self, client: Any, bulk: Any, not_found: type[Exception], bad_request: type[Exception],
        own_client: Any | None = None,
    ):
        self._client = client
        # unbound clients: `_raw` for calls made for callers, `_own_raw` for the process's
        # own identity (the same client, unless a client certificate is its own alone)
        self._raw = client
        self._own_raw = client if own_client is None else own_client
        self._headers: dict[str, str] | None = None  # bound by with_headers
        self._bulk = bulk
        self._not_found = not_found
        self._bad_request = bad_request
        self._owns_client = True
        self._filters: tuple[Mapping[str, Any], ...] = ()
        # the vector field whose stored vectors this view reads (`with_vector_field`), and
        # that field again where the index's `_source` lacks them
        self._vector_field: str | None = None
        self._doc_value_vectors: str | None = None
        self._plugin_vectors = False
        self._batch = self._new_batch()
        self._doc_ids = LRUCache(maxsize=DOC_IDS_KEPT)
        # (endpoint, identity: a digest of its headers) where the engine refused that
        # identity a multi-doc endpoint (`_msearch`, `_mtermvectors`): shared by every view,
        # never by two identities
        self._refused: TTLCache[tuple[str, str], bool] = TTLCache(
            maxsize=REFUSALS_KEPT, ttl=REFUSAL_TTL_S)
        self._sharded = LRUCache(maxsize=SHARDED_KEPT)  # shared by every view
        # indices where `hybrid_legs`' painless script failed (painless off, say), where the
        # es-tour plugin's did (no plugin), and (index, identity) where the plugin's read no
        # vector for a hit (`PluginReads`): shared by every view too
        self._unscripted: LRUCache[str, bool] = LRUCache(maxsize=SHARDED_KEPT)
        self._untoured: LRUCache[str, bool] = LRUCache(maxsize=SHARDED_KEPT)
        self._vectorless: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=SHARDED_KEPT)

    def _view(self) -> ClientEngine:
        """A copy of this engine that shares its connections (closing it leaves them open)
        but batches its own searches and remembers its own doc keys."""
        view = copy.copy(self)
        view._owns_client = False
        view._batch = view._new_batch()
        view._doc_ids = LRUCache(maxsize=DOC_IDS_KEPT)
        return view

    def with_headers(self, headers: Mapping[str, str]) -> ClientEngine:
        """This engine sending `headers` (a caller's credentials) on every call, over the
        same connection pool; closing it leaves the pool open."""
        view = self._view()
        view._headers = dict(headers)
        view._client = self._bind(self._raw, view._headers)
        return view

    def as_own_identity(self) -> ClientEngine:
        """This engine's calls as the process's own identity: with the headers bound so far
        (the sidecar's service credentials, or none), over the connections that show the
        client certificate kept to the process's own calls (`UpstreamTls.own_calls_only`).
        Without such a certificate, the same connections as every other call."""
        view = self._view()
        view._client = (self._own_raw if self._headers is None
                        else self._bind(self._own_raw, self._headers))
        return view

    def with_filters(self, filters: Sequence[Mapping[str, Any]]) -> ClientEngine:
        """This engine keeping only docs that match every query of `filters` in each
        search: BM25 and any query DSL as a bool filter, kNN with the engine's own filtered
        kNN. A request's constraints, kept by every round of every method."""
        view = self._view()
        view._filters = (*self._filters, *filters)
        return view

    def _constraints(self, ids: Sequence[str] | None) -> list[Mapping[str, Any]]:
        return [*self._filters, *([] if ids is None else [ids_query(ids)])]

    @contextmanager
    def engine_errors(self) -> Iterator[None]:
        """The client's errors as es-tour's: an engine answer keeps its status and body
        (EngineError); an engine that cannot be reached is an UpstreamError (502)."""
        try:
            yield
        except self._transport_error as exc:  # before _api_error: opensearch-py nests them
            raise UpstreamError(f"{self.name} unreachable: {type(exc).__name__}") from None
        except self._api_error as exc:
            status, body = self._error_answer(exc)
            raise EngineError(status, body) from None

    # The client-specific parts: per-request headers and what an error answer holds.
    _api_error: type[Exception] = Exception
    _transport_error: type[Exception] = Exception

    def _bind(self, client: Any, headers: dict[str, str]) -> Any:
        """`client` sending `headers` on every call."""
        raise NotImplementedError

    def _error_answer(self, exc: Exception) -> tuple[int, object]:
        raise NotImplementedError

    # The two dialects: how a vector field is mapped and how a kNN search is written.
    def _vector_mapping(self, spec: IndexSpec) -> dict[str, Any]:
        raise NotImplementedError

    def _index_settings(self, spec: IndexSpec) -> dict[str, Any]:
        return {}

    def _knn_clause(
        self,
        vector: np.ndarray,
        k: int,
        num_candidates: int,
        field: str,
        filters: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """A kNN query clause, for a `bool` to hold, keeping only the docs that match every
        query of `filters`."""
        raise NotImplementedError

    def _knn_body(
        self,
        vector: np.ndarray,
        k: int,
        num_candidates: int,
        field: str,
        filters: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """A kNN search keeping only the docs that match every query of `filters`."""
        return {"query": self._knn_clause(vector, k, num_candidates, field, filters)}

    async def create_index(self, spec: IndexSpec, *, replace: bool = False) -> bool:
        """Create the index; returns False when it exists and `replace` is not set."""
        if await self._client.indices.exists(index=spec.name):
            if not replace:
                return False
            await self.delete_index(spec.name)
        try:
            await self._client.indices.create(index=spec.name, body=self._index_body(spec))
        except self._bad_request as error:
            if spec.text_analyzer not in str(error):
                raise
            raise EngineSetupError(
                f"the engine has no analyzer [{spec.text_analyzer}]: install the es-tour "
                "plugin (`make plugin`, then `es-tour engine start --plugin "
                "plugin/target/tour-settings[-es]-0.1.0.zip`)"
            ) from error
        return True

    async def index_matches(self, spec: IndexSpec) -> bool:
        """Whether the existing index has `spec`'s mappings and BM25 similarity.

        An index made by an older es-tour (another analyzer, say) would rank differently.
        """
        expected = self._index_body(spec)
        actual = await self._mappings(spec.name)
        similarity = expected["settings"]["similarity"]["default"]
        settings = await self.settings(spec.name)
        # the mark is not compared: an index es-tour made before it had one still matches
        return _contains(actual.get("properties"), expected["mappings"]["properties"]) and all(
            str(settings.get(f"index.similarity.default.{key}")) == str(value)
            for key, value in similarity.items()
        )

    async def exists(self, index: str) -> bool:
        return bool(await self._client.indices.exists(index=index))

    async def made_by_es_tour(self, name: str) -> bool:
        """Whether es-tour created the index (its mappings' `_meta` mark): only such an index
        may be rebuilt without being asked to."""
        return bool((await self._mappings(name)).get("_meta", {}) == CREATED_BY)

    async def _mappings(self, name: str) -> dict[str, Any]:
        mapping = await self._client.indices.get_mapping(index=name)
        return dict(next(iter(mapping.values()))["mappings"])

    def _index_body(self, spec: IndexSpec) -> dict[str, Any]:
        settings = {
            "number_of_shards": spec.shards,
            # no replica on one node (it could never be assigned), one on a cluster of two or more
            "auto_expand_replicas": "0-1",
            "similarity": {"default": {"type": "BM25", "k1": spec.bm25_k1, "b": spec.bm25_b}},
            **self._index_settings(spec),
        }
        properties: dict[str, Any] = {
            name: {"type": "text", "analyzer": spec.text_analyzer} for name in spec.text_fields
        }
        properties[spec.vector_field] = self._vector_mapping(spec)
        properties.update({name: {"type": kind} for name, kind in spec.metadata_fields})
        return {"settings": settings,
                "mappings": {"_meta": dict(CREATED_BY), "properties": properties}}

    async def create_side_index(
        self, name: str, properties: Mapping[str, Any], *, replace: bool = False,
        hidden: bool = False, shards: int = 1,
    ) -> bool:
        """An index of records (`shards` primaries, one by default, a replica where a second
        node can hold it, these field mappings, no vectors), such as judgements; `hidden`:
        one that no wildcard or `_all` names (`index.hidden`). Returns False when it exists
        (made by another caller meanwhile, too) and `replace` is not set."""
        if await self._client.indices.exists(index=name):
            if not replace:
                return False
            await self.delete_index(name)
        settings: dict[str, Any] = {"number_of_shards": shards, "auto_expand_replicas": "0-1"}
        if hidden:
            settings["hidden"] = True
        body = {"settings": settings,
                "mappings": {"_meta": dict(CREATED_BY), "properties": dict(properties)}}
        try:
            await self._client.indices.create(index=name, body=body)
        except self._bad_request as exc:
            if "resource_already_exists" not in str(exc):
                raise
            return False
        return True

    async def bulk_index(
        self, index: str, docs: Iterable[Mapping[str, Any]], *, max_retries: int = 3
    ) -> BulkReport:
        """Index docs by their `_id`, retrying failed items; re-running never duplicates."""
        pending = [
            {
                "_op_type": "index",
                "_index": index,
                "_id": str(doc["_id"]),
                "_source": {key: value for key, value in doc.items() if key != "_id"},
            }
            for doc in docs
        ]
        by_id = {action["_id"]: action for action in pending}
        indexed = retried = 0
        failed: list[dict[str, Any]] = []
        for attempt in range(max_retries + 1):
            ok, errors = await self._bulk(
                self._client,
                pending,
                chunk_size=_BULK_CHUNK,
                raise_on_error=False,
                raise_on_exception=False,
                max_retries=2,
            )
            indexed += ok
            failed = list(errors)
            if not failed or attempt == max_retries:
                break
            pending = [by_id[_error_id(error)] for error in failed]
            retried += len(pending)
            await asyncio.sleep(0.5 * 2**attempt)
        return BulkReport(indexed=indexed, retried=retried, failed=failed)

    async def bm25(
        self,
        index: str,
        text: str,
        k: int,
        *,
        fields: Sequence[str] = ("title", "text"),
        ids: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        ids_only: bool = False,
        keyed: bool = False,
    ) -> list[Hit]:
        return await self.bool_search(index, text_query(text, fields), k, ids=ids,
                                      exclude=exclude, ids_only=ids_only, keyed=keyed)

    async def knn(
        self,
        index: str,
        vector: np.ndarray,
        k: int,
        *,
        num_candidates: int | None = None,
        field: str = "embedding",
        ids: Sequence[str] | None = None,
        returns: KnnReturns = "vectors",
    ) -> list[Hit]:
        """Approximate kNN. `returns`: "vectors" (the source with the stored vectors, so
        callers can compute q·c), "text" (the source without them), "ids" (no source) or
        "keys" (no stored field at all: each hit named by its doc key where the index has
        one shard, see `keyed_search`). Each 384-d vector is ~8 KB of JSON, so callers ask
        only for what they read."""
        if ids is not None and returns in ("ids", "keys"):
            clause = self._knn_clause(wire_vector(vector), k,
                                      num_candidates or max(k, 100), field,
                                      self._constraints(ids))
            return await self._scores_of(index, clause, ids)
        body = self._knn_body(
            wire_vector(vector),
            k,
            num_candidates or max(k, 100),
            field,
            self._constraints(ids),
        )
        if returns == "keys":
            return await self.keyed_search(index, {"size": k, **body})
        if returns == "text":
            body["_source"] = {"excludes": [field]}
        elif returns == "ids":
            body["_source"] = False
        elif returns != "vectors":
            raise ValueError(f"returns must be vectors, text, ids or keys, got {returns!r}")
        wanted = self._vectors_wanted(() if returns == "vectors" else (field,))
        return await self._hits_with_vectors(index, {"size": k, **body}, wanted, field, ids)

    async def bool_search(
        self,
        index: str,
        query: Mapping[str, Any],
        k: int,
        *,
        ids: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        ids_only: bool = False,
        keyed: bool = False,
        overview: Overview | None = None,
    ) -> list[Hit]:
        """Any query DSL; `exclude` drops source fields (vectors) the caller does not need,
        `ids_only` the whole source: a pool leg reads ids and scores, and the engine then
        neither loads nor filters a source (most of a search's cost). `keyed`: no stored
        field at all, each hit named by its doc key where the index has one shard
        (`keyed_search`), counting `overview` where given."""
        if ids is not None and (ids_only or keyed):
            return await self._scores_of(
                index, {"bool": {"must": [query], "filter": self._constraints(None)}}, ids)
        body: dict[str, Any] = {"size": k, "query": constrained(query, self._constraints(ids))}
        if keyed:
            return await self.keyed_search(index, body, overview)
        if ids_only:
            body["_source"] = False
            return await self._search_hits(index, body, None, None, ids)
        if exclude:
            body["_source"] = {"excludes": list(exclude)}
        return await self._hits_with_vectors(index, body, self._vectors_wanted(exclude), None,
                                             ids)

    async def search(self, index: str, body: Mapping[str, Any],
                     params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A search as written, with the URL parameters `params` as a client sent them,
        answered as the engine answers it: no filters of this view are added (a request's
        own page, total and aggregations, fetched for it)."""
        raise NotImplementedError

    async def docs_by_id(self, index: str, ids: Sequence[str], *, exclude: Sequence[str] = (),
                         include: Sequence[str] | None = None, vectors: bool = True
                         ) -> list[Hit]:
        """The docs of `ids` that exist, in `ids`' order (each once); `exclude` drops source
        fields, `include` keeps only those named (a vector field among them is read as
        `exclude` would keep it); `vectors` False asks no vector from doc values (the source
        keeps what it holds). One ids search, not `_mget`: a search is what the `read`
        action group grants on an index, where OpenSearch Security checks `_mget` as a
        cluster action. The view's filters are not added (these are docs a search already
        returned)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        body: dict[str, Any] = {"size": len(unique), "query": ids_query(unique),
                                "track_total_hits": False}
        if include is not None:
            body["_source"] = {"includes": list(include)}
            wanted = self._vector_field if self._vector_field in include else None
        else:
            if exclude:
                body["_source"] = {"excludes": list(exclude)}
            wanted = self._vectors_wanted(exclude) if vectors else None
        found = first_of_each(await self._hits_with_vectors(index, body, wanted, wanted, unique))
        return [Hit(i, 0.0, found[i].source, found[i].vector, found[i].index)
                for i in unique if i in found]

    async def docs_in_key_order(self, index: str, size: int, after: str | None = None
                                ) -> list[Hit]:
        """Up to `size` docs of the one-shard `index`, each named by its doc key, in
        `_seq_no` order from the one after the key `after`: as `docs_by_id` gives them
        (whole sources, stored vectors), with their names known to this view
        (`known_name`). A plain search (what `read` grants), after the last page's sequence
        number: no result window bounds the pages. The view's filters are not added."""
        body: dict[str, Any] = {"size": size, "query": {"match_all": {}},
                                "sort": [{"_seq_no": "asc"}], "track_total_hits": False}
        if after is not None and (seq_no := key_seq_no(after)) is not None:
            body["search_after"] = [seq_no]
        wanted = self._vectors_wanted(())
        return await self._hits_with_vectors(index, body, wanted, wanted, None, keyed=True)

    def own_view(self) -> ClientEngine:
        """A view of this engine for work beside a search's: the same identity and
        connections, a batch and doc keys of its own."""
        return self._view()

    async def scan(self, index: str, fields: Sequence[str], *, batch: int = 500
                   ) -> AsyncIterator[list[Hit]]:
        """Every doc of `index` with only `fields` of its source, `batch` at a time, in the
        engine's cheapest order (a scroll, cleared at the end)."""
        response = await self._client.search(
            index=index, scroll="5m", body={"size": batch, "sort": ["_doc"],
                                            "_source": list(fields)})
        scroll_id = response.get("_scroll_id")
        try:
            while hits := read_hits(response, None):
                yield hits
                response = await self._client.scroll(body={"scroll_id": scroll_id,
                                                           "scroll": "5m"})
                scroll_id = response.get("_scroll_id", scroll_id)
        finally:
            if scroll_id:
                await self._client.clear_scroll(body={"scroll_id": scroll_id})

    async def vector_field(self, index: str, field: str) -> VectorField:
        """`field` as one doc of `index` holds it: its dimension and whether `_source` keeps
        its vectors (an index may exclude them to save disk), read by a search, not the
        mapping, so any caller who may search the index may ask; an index with no vector
        yet says None and in_source. Its similarity where the mapping says
        (`_field_similarity`). A ConfigError (400) when `field` holds no vectors."""
        # The whole `_source`, as later searches read it: Elasticsearch 9.x leaves vectors out
        # of it by default (index.mapping.exclude_source_vectors) yet returns a field named in
        # `_source` includes, which would read as in_source.
        body = {"size": 1, "query": {"exists": {"field": field}}}
        asked, key = self._doc_values_asked(body, field)
        no_vectors = ConfigError(f"index [{index}] has no vector field [{field}] (knn_vector "
                                 "or dense_vector); name it in index.tour.vector_field")
        try:
            response = await self._client.search(index=index, body=asked)
        except self._bad_request:  # e.g. a text field: no vector doc values to read
            raise no_vectors from None
        hits = response["hits"]["hits"]
        if not hits:
            return VectorField(field, None, True)
        similarity = await self._field_similarity(index, field)
        in_source = source_value(hits[0].get("_source", {}), field)
        if isinstance(in_source, list):
            return VectorField(field, len(in_source), True, similarity)
        values = hits[0].get("fields", {}).get(key)
        if values and isinstance(values[0], list):
            return VectorField(field, len(values[0]), False, similarity)
        raise no_vectors

    async def settings(self, index: str) -> dict[str, Any]:
        """The index's settings, flattened: {"index.number_of_shards": "1", ...}."""
        response = await self._client.indices.get_settings(index=index, flat_settings=True)
        return dict(response[index]["settings"])

    async def put_settings(self, index: str, settings: Mapping[str, Any]) -> None:
        """Update the index's dynamic settings (`index.tour.*` is validated by the plugin:
        a bad value is the engine's own 400)."""
        try:
            await self._client.indices.put_settings(index=index, body=dict(settings))
        except self._bad_request as error:
            if "index.tour." not in str(error) or "unknown setting" not in str(error):
                raise
            raise EngineSetupError(
                "the engine does not know the index.tour.* settings: install the es-tour "
                "plugin (`make plugin`, then `es-tour engine start --plugin "
                "plugin/target/tour-settings[-es]-0.1.0.zip`)"
            ) from error

    async def count(self, index: str) -> int:
        return int((await self._client.count(index=index))["count"])

    async def refresh(self, index: str) -> None:
        await self._client.indices.refresh(index=index)

    async def delete_index(self, index: str) -> None:
        try:
            await self._client.indices.delete(index=index)
        except self._not_found:
            pass

    async def version(self) -> str:
        nodes = await self._client.nodes.info(node_id="_local", metric="_none")
        return str(next(iter(nodes["nodes"].values()))["version"])

    async def close(self) -> None:
        if self._owns_client:
            await self._raw.close()
            if self._own_raw is not self._raw:
                await self._own_raw.close()

    async def __aenter__(self) -> ClientEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def text_query(text: str, fields: Sequence[str]) -> dict[str, Any]:
    """BM25 over the text fields, each field's score added (the BEIR baselines' setting):
    what an offline run (eval, tune, the frontier) searches with, and what a request sends
    to the sidecar to be ranked as those runs rank (its BM25 leg is the request's query)."""
    return {"bool": {"should": [
        {"multi_match": {"query": text, "fields": list(fields), "type": "most_fields"}}]}}


def _contains(actual: Any, expected: Any) -> bool:
    """Whether `actual` holds every key and value of `expected` (engines add defaults)."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and _contains(actual[key], value) for key, value in expected.items()
        )
    return bool(actual == expected)


def _error_id(error: Mapping[str, Any]) -> str:
    (item,) = error.values()
    return str(item["_id"])
