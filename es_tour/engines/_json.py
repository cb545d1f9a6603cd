"""The engine clients' wire formats: JSON read and written with orjson, and CBOR answers.

A refined search reads pages of hits with their 384-d vectors in every round; orjson
decodes them many times faster than the json module (docs/benchmarks/decode.md), which
would otherwise be most of a refined search's own CPU. What orjson refuses but JSON allows
(integers past 64 bits) falls back to the json module.

es-tour's own searches (pool legs, the docs it labels, their vectors) ask for CBOR answers:
the engine then writes each score and vector component as the binary float it holds,
where JSON spells each one out in decimal, a large part of the engine's CPU for a page of
scores or vectors (docs/benchmarks/load.md). What a caller sees is always JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import cbor2
import orjson
from elastic_transport import JsonSerializer
from elastic_transport import SerializationError as ElasticSerializationError
from elastic_transport import Serializer as ElasticSerializer
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer
from opensearchpy.serializer import Serializer as OpenSearchSerializerBase

CBOR = "application/cbor"
# Elasticsearch's 8.x clients ask for compatible answers: both headers must say so
ELASTICSEARCH_CBOR = "application/vnd.elasticsearch+cbor; compatible-with=8"


def loads(data: str | bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(data: Any, default: Callable[[Any], Any], pretty: bool = False) -> bytes:
    try:
        return orjson.dumps(data, default=default, option=orjson.OPT_SERIALIZE_NUMPY
                            | (orjson.OPT_INDENT_2 if pretty else 0))
    except TypeError:  # e.g. keys that are not strings, which the json module converts
        return json.dumps(data, default=default, ensure_ascii=False, indent=2 if pretty else None,
                          separators=None if pretty else (",", ":")).encode()


class ElasticsearchSerializer(JsonSerializer):
    def json_loads(self, data: bytes) -> Any:
        return loads(data)

    def json_dumps(self, data: Any) -> bytes:
        return dumps(data, self.default)


class OpenSearchSerializer(JSONSerializer):
    def loads(self, s: str) -> Any:
        try:
            return loads(s)
        except (ValueError, TypeError) as e:
            raise SerializationError(s, e) from e

    def dumps(self, data: Any) -> Any:
        if isinstance(data, str):
            return data
        try:
            return dumps(data, self.default).decode()
        except (ValueError, TypeError) as e:
            raise SerializationError(data, e) from e


class ElasticsearchCbor(ElasticSerializer):
    """Reads CBOR answers (elastic-transport hands a deserializer the answer's bytes)."""

    mimetype = CBOR

    def loads(self, data: bytes) -> Any:
        return cbor2.loads(data)

    def dumps(self, data: Any) -> bytes:
        raise ElasticSerializationError("es-tour sends no CBOR")


class OpenSearchCbor(OpenSearchSerializerBase):
    """Reads CBOR answers, which opensearch-py hands over as text: one character per byte
    (`_opensearch.BytesKeepingConnection`)."""

    mimetype = CBOR

    def loads(self, s: str) -> Any:
        try:
            return cbor2.loads(s.encode("latin-1"))
        except (ValueError, UnicodeEncodeError) as e:
            raise SerializationError(s, e) from e

    def dumps(self, data: Any) -> Any:
        raise SerializationError(data, TypeError("es-tour sends no CBOR"))
