"""Elasticsearch: `dense_vector` fields and the top-level `knn` search option."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np
from elasticsearch import ApiError, AsyncElasticsearch, BadRequestError, NotFoundError
from elasticsearch import TransportError as ElasticTransportError
from elasticsearch.helpers import async_bulk

from es_tour.engines._base import ClientEngine
from es_tour.engines._json import ElasticsearchNdjsonSerializer, ElasticsearchSerializer
from es_tour.engines._types import IndexSpec, Similarity


class ElasticsearchEngine(ClientEngine):
    name = "elasticsearch"
    _api_error = ApiError
    _transport_error = ElasticTransportError
    _legs_by_named_query = True  # `include_named_queries_score` (8.8 on)
    _unit_cosine_vectors = True  # a cosine field's vectors are normalised as they are indexed

    def __init__(self, url: str | Sequence[str], *, own_ssl_context: Any = None,
                 **client_options: Any):
        """`own_ssl_context`, when given, makes a second client with it for the process's
        own calls (`ClientEngine.as_own_identity`)."""
        hosts = url if isinstance(url, str) else list(url)

        def client(**tls: Any) -> AsyncElasticsearch:
            serializers = {ElasticsearchSerializer.mimetype: ElasticsearchSerializer(),
                           ElasticsearchNdjsonSerializer.mimetype: ElasticsearchNdjsonSerializer()}
            return AsyncElasticsearch(hosts, request_timeout=60, serializers=serializers,
                                      **{**client_options, **tls})

        own = None if own_ssl_context is None else client(ssl_context=own_ssl_context)
        super().__init__(client(), async_bulk, NotFoundError, BadRequestError, own)
        self._keep_source_vectors = False  # learnt from the engine's version at create_index

    async def create_index(self, spec: IndexSpec, *, replace: bool = False) -> bool:
        # 9.x leaves dense_vector values out of `_source` by default, where es-tour reads them
        self._keep_source_vectors = int((await self.version()).split(".")[0]) >= 9
        return await super().create_index(spec, replace=replace)

    def _index_settings(self, spec: IndexSpec) -> dict[str, Any]:
        return {"mapping.exclude_source_vectors": False} if self._keep_source_vectors else {}

    def _bind(self, client: Any, headers: dict[str, str]) -> Any:
        return client.options(headers=headers)

    def _named_scores(self, on: bool) -> dict[str, Any]:
        return {"include_named_queries_score": True} if on else {}

    def _error_answer(self, exc: Exception) -> tuple[int, object]:
        assert isinstance(exc, ApiError)
        return exc.meta.status, exc.body

    async def search(self, index: str, body: Mapping[str, Any],
                     params: Mapping[str, str] | None = None) -> dict[str, Any]:
        # the client's search() moves fetch options (explain, version, ...) into the body
        # and names others its own way: the request goes as the caller wrote it
        answer = await self._client.perform_request(
            "POST", f"/{quote(index, safe=',*')}/_search", params=dict(params or {}),
            headers={"accept": "application/json", "content-type": "application/json"},
            body=dict(body))
        return dict(answer.body)

    def _vector_mapping(self, spec: IndexSpec) -> dict[str, Any]:
        return {
            "type": "dense_vector",
            "dims": spec.dimension,
            "index": True,
            "similarity": spec.similarity,
            # float HNSW, like OpenSearch's; 8.x would otherwise pick int8_hnsw
            "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100},
        }

    async def _field_similarity(self, index: str, field: str) -> Similarity | None:
        # a mapping the caller may not read (`view_index_metadata`): the legs go apart
        try:
            answer = await self._client.indices.get_field_mapping(index=index, fields=field)
        except ApiError:
            return None
        found = {leaf.get("similarity") for mappings in answer.values()
                 for leaf in mappings.get("mappings", {}).get(field, {}).get("mapping", {})
                 .values()}
        similarity = found.pop() if len(found) == 1 else None
        return similarity if similarity in ("dot_product", "cosine") else None

    def _vector_request(self, field: str) -> tuple[dict[str, Any], str]:
        # an indexed dense_vector answers docvalue_fields (8.x); the fields API reads _source
        return {"docvalue_fields": [field]}, field

    def _knn_clause(
        self,
        vector: np.ndarray,
        k: int,
        num_candidates: int,
        field: str,
        filters: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        # the knn query (8.12 on): the same similarity score as the top-level knn's
        return {"knn": self._knn_body(vector, k, num_candidates, field, filters)["knn"]}

    def _knn_body(
        self,
        vector: np.ndarray,
        k: int,
        num_candidates: int,
        field: str,
        filters: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        knn: dict[str, Any] = {
            "field": field,
            "query_vector": vector,
            "k": k,
            "num_candidates": max(num_candidates, k),
        }
        if filters:
            knn["filter"] = list(filters)
        return {"knn": knn}
