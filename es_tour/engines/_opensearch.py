"""OpenSearch: `knn_vector` fields (Lucene HNSW) and the `knn` query clause."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from opensearchpy import AsyncOpenSearch, NotFoundError, RequestError, TransportError
from opensearchpy import ConnectionError as OpenSearchConnectionError
from opensearchpy.client.utils import NamespacedClient
from opensearchpy.helpers import async_bulk

from es_tour.engines._base import ClientEngine
from es_tour.engines._json import OpenSearchSerializer
from es_tour.engines._types import IndexSpec, Similarity

_SPACE: dict[Similarity, str] = {"dot_product": "innerproduct", "cosine": "cosinesimil"}
# the k-NN plugin's painless function of each similarity, and a similarity of each space type
_FUNCTION = {"dot_product": "innerProduct", "cosine": "cosineSimilarity"}
_SIMILARITY: dict[str | None, Similarity] = {
    space: similarity for similarity, space in _SPACE.items()}
CLIENT_TIMEOUT_S = 60
# knn_vector doc values answer neither docvalue_fields nor the fields API, but a script
# reads them (the k-NN plugin's painless extension): one script field per hit. The value is
# copied: on 2.19 every hit's `value` is one shared buffer, so uncopied all hits would show
# the last doc's vector (integration_tests/test_foreign_index.py).
_VECTOR_KEY = "_tour_vector"
_VECTOR_SCRIPT = ("if (doc[params.field].size() == 0) { return null; } "
                  "def v = doc[params.field].value; float[] copy = new float[v.length]; "
                  "for (int i = 0; i < v.length; ++i) { copy[i] = v[i]; } return copy;")


class OpenSearchEngine(ClientEngine):
    name = "opensearch"
    _api_error = TransportError
    _transport_error = OpenSearchConnectionError

    def __init__(self, url: str | Sequence[str], *, own_ssl_context: Any = None,
                 **client_options: Any):
        """`own_ssl_context`, when given, makes a second client with it for the process's
        own calls (`ClientEngine.as_own_identity`)."""
        hosts = [url] if isinstance(url, str) else list(url)

        def client(**tls: Any) -> AsyncOpenSearch:
            return AsyncOpenSearch(hosts=hosts, timeout=CLIENT_TIMEOUT_S,
                                   serializer=OpenSearchSerializer(),
                                   **{**client_options, **tls})

        own = None if own_ssl_context is None else client(ssl_context=own_ssl_context)
        super().__init__(client(), async_bulk, NotFoundError, RequestError, own)

    def _bind(self, client: Any, headers: dict[str, str]) -> Any:
        return _WithHeaders(client, headers)

    def _error_answer(self, exc: Exception) -> tuple[int, object]:
        assert isinstance(exc, TransportError)
        return int(exc.status_code), exc.info

    async def search(self, index: str, body: Mapping[str, Any],
                     params: Mapping[str, str] | None = None) -> dict[str, Any]:
        # opensearch-py takes a `timeout` parameter for its own socket timeout unless
        # `request_timeout` is given: the caller's `timeout` is the engine's search timeout
        asked = {**(params or {}), "request_timeout": CLIENT_TIMEOUT_S}
        return dict(await self._client.search(index=index, body=dict(body), params=asked))

    def _index_settings(self, spec: IndexSpec) -> dict[str, Any]:
        return {"knn": True}

    def _vector_mapping(self, spec: IndexSpec) -> dict[str, Any]:
        # The Lucene engine needs no native libraries, which the Maven plugin zip lacks.
        return {
            "type": "knn_vector",
            "dimension": spec.dimension,
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": _SPACE[spec.similarity],
                "parameters": {"m": 16, "ef_construction": 100},
            },
        }

    def _dense_script(self, similarity: Similarity) -> str | None:
        # the k-NN plugin's painless extension: q·c as its kNN compares them (raw, an affine
        # map of its score where q·c >= 0); a doc without a vector gets none
        return (f"if (doc[params.f].size() == 0) {{ return null; }} "
                f"return {_FUNCTION[similarity]}(params.q, doc[params.f]);")

    async def _field_similarity(self, index: str, field: str) -> Similarity | None:
        # the `read` action group grants field mappings; an alias may name several indices
        try:
            answer = await self._client.indices.get_field_mapping(index=index, fields=field)
        except TransportError:
            return None
        spaces = set()
        for mappings in answer.values():
            for leaf in mappings.get("mappings", {}).get(field, {}).get("mapping", {}).values():
                spaces.add(leaf.get("space_type") or leaf.get("method", {}).get("space_type"))
        return _SIMILARITY.get(spaces.pop()) if len(spaces) == 1 else None

    def _vector_request(self, field: str) -> tuple[dict[str, Any], str]:
        script = {"source": _VECTOR_SCRIPT, "params": {"field": field}}
        return {"script_fields": {_VECTOR_KEY: {"script": script}}}, _VECTOR_KEY

    def _knn_clause(
        self,
        vector: np.ndarray,
        k: int,
        num_candidates: int,
        field: str,
        filters: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        clause: dict[str, Any] = {
            "vector": vector,
            "k": k,
            "method_parameters": {"ef_search": num_candidates},
        }
        if filters:  # efficient filtering, Lucene and Faiss engines alike
            clause["filter"] = {"bool": {"filter": list(filters)}}
        return {"knn": {field: clause}}


class _WithHeaders:
    """The client (or one of its namespaces, e.g. `indices`) with `headers` added to every
    API call: opensearch-py takes per-request headers as each method's `headers=`."""

    def __init__(self, target: Any, headers: dict[str, str]):
        self._target = target
        self._headers = headers

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if isinstance(value, NamespacedClient):
            return _WithHeaders(value, self._headers)
        if callable(value):
            return functools.partial(value, headers=self._headers)
        return value
