"""The engine clients' JSON (es_tour.engines._json): orjson, with the json module for what
orjson refuses, and each client's own error for what is not JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from elastic_transport import SerializationError as ElasticSerializationError
from opensearchpy.exceptions import SerializationError as OpenSearchSerializationError

from es_tour.engines import connect
from es_tour.engines._json import (
    ElasticsearchNdjsonSerializer,
    ElasticsearchSerializer,
    OpenSearchSerializer,
    wire_vector,
)

PAGE = {"hits": {"total": {"value": 2}, "hits": [
    {"_id": "1", "_score": 1.5, "_source": {"text": "café ☕", "embedding": [0.25, -1e-8, 3.0]}},
    {"_id": "2", "_score": None, "_source": {"text": "", "embedding": []}}]}}
HUGE = 2**70  # past orjson's 64 bits, yet valid JSON (an unsigned_long sum can reach it)


@pytest.mark.parametrize("serializer", [ElasticsearchSerializer(), OpenSearchSerializer()])
def test_a_page_reads_and_writes_as_the_json_module_does(serializer):
    text = json.dumps(PAGE)
    assert serializer.loads(text.encode() if isinstance(serializer, ElasticsearchSerializer)
                            else text) == json.loads(text)
    assert json.loads(serializer.dumps(PAGE)) == PAGE


@pytest.mark.parametrize("serializer", [ElasticsearchSerializer(), OpenSearchSerializer()])
def test_integers_past_64_bits_fall_back_to_the_json_module(serializer):
    text = json.dumps({"value": HUGE})
    raw = text.encode() if isinstance(serializer, ElasticsearchSerializer) else text
    assert serializer.loads(raw) == {"value": HUGE}
    assert json.loads(serializer.dumps({"value": HUGE})) == {"value": HUGE}


@pytest.mark.parametrize("serializer", [ElasticsearchSerializer(), OpenSearchSerializer()])
def test_numpy_vectors_are_written_as_lists(serializer):
    vector = np.array([0.5, -0.25], dtype=np.float32)
    assert json.loads(serializer.dumps({"vector": vector})) == {"vector": [0.5, -0.25]}


@pytest.mark.parametrize("serializer", [ElasticsearchSerializer(), OpenSearchSerializer(),
                                        ElasticsearchNdjsonSerializer()])
def test_a_query_vector_is_written_at_float32s_digits_and_read_back_exactly(serializer):
    rng = np.random.default_rng(7)
    vector = rng.standard_normal(384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    strided = np.stack([vector, vector], axis=1)[:, 0]  # orjson takes contiguous arrays only
    body = {"knn": {"vector": wire_vector(strided)}}
    written = serializer.dumps([body] if isinstance(serializer, ElasticsearchNdjsonSerializer)
                               else body)
    read = np.asarray(json.loads(written)["knn"]["vector"], dtype=np.float32)
    assert np.array_equal(read, vector)  # what the engine parses: the same float32s
    as_doubles = json.dumps({"knn": {"vector": vector.tolist()}})
    assert len(written) < 0.65 * len(as_doubles)


def test_what_is_not_json_is_each_clients_own_error():
    with pytest.raises(ElasticSerializationError):
        ElasticsearchSerializer().loads(b"{not json")
    with pytest.raises(OpenSearchSerializationError):
        OpenSearchSerializer().loads("{not json")


@pytest.mark.parametrize("engine", ["opensearch", "elasticsearch"])
async def test_both_clients_are_given_these_serializers(engine):
    """Fails when an engine's client is left on the json module."""
    async with connect(engine, "http://localhost:1") as adapter:
        transport = adapter._client.transport
        if engine == "elasticsearch":  # responses come as application/vnd.elasticsearch+json
            read = transport.serializers.serializers["application/vnd.elasticsearch+json"]
            assert type(read) is ElasticsearchSerializer  # not the NDJSON one, its subclass
            # `_msearch` bodies, which carry the query vectors
            lines = transport.serializers.serializers["application/vnd.elasticsearch+x-ndjson"]
            assert isinstance(lines, ElasticsearchNdjsonSerializer)
        else:
            assert isinstance(transport.deserializer.serializers["application/json"],
                              OpenSearchSerializer)
            assert isinstance(transport.serializer, OpenSearchSerializer)


def test_the_sidecars_answers_are_written_compact_or_pretty_with_numpy_and_odd_keys():
    from es_tour.engines import json_bytes

    answer = {**PAGE, "ext": {"score": np.float32(0.5), "vector": np.arange(2.0),
                              "docs": ("a", "b"), "by_round": {1: "x"}}}
    plain = json.loads(json.dumps(answer, default=lambda v: v.tolist()))
    compact = json_bytes(answer, lambda v: v.tolist())
    pretty = json_bytes(answer, lambda v: v.tolist(), pretty=True)
    assert json.loads(compact) == json.loads(pretty) == plain
    assert b"\n" not in compact and b'\n  "hits"' in pretty
