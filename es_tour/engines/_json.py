"""The engine clients' JSON, and the sidecar's answers, read and written with orjson.

A refined search reads pages of hits with their 384-d vectors in every round; orjson
decodes them many times faster than the json module (docs/benchmarks/decode.md), which
would otherwise be most of a refined search's own CPU. What orjson refuses but JSON allows
(integers past 64 bits) falls back to the json module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from elastic_transport import JsonSerializer, NdjsonSerializer
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer


def wire_vector(vector: Any) -> np.ndarray:
    """A query vector as a request body carries it: float32, which orjson writes at float32's
    shortest digits, about half the bytes of a float64's 17. Lossless: every engine field
    and the es-tour plugin's script read the floats back as the same float32s."""
    return np.ascontiguousarray(vector, dtype=np.float32)


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


class ElasticsearchNdjsonSerializer(ElasticsearchSerializer, NdjsonSerializer):
    """`_msearch` and `_bulk` bodies: NDJSON, each line by orjson as `ElasticsearchSerializer`
    writes a body."""


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
