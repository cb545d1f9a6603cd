"""Reading an engine's search answer: its hits, with their stored vectors where asked."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from es_tour.engines._types import Hit, doc_key


def source_value(source: Mapping[str, Any], field: str) -> Any:
    """The value of `field` in a source, its dotted name flat (`{"a.b": v}`) or nested."""
    if field in source:
        return source[field]
    value: Any = source
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def first_of_each(hits: Iterable[Hit]) -> dict[str, Hit]:
    """Each doc's first hit, by id: an alias over several indices may answer a doc from
    each, and the first is the one a search of the alias shows."""
    found: dict[str, Hit] = {}
    for hit in hits:
        found.setdefault(hit.id, hit)
    return found


def doc_values_vector(value: str | list[float]) -> np.ndarray:
    """A vector read from doc values: the es-tour plugin's base64 of little-endian float32s,
    or the engine's own list of floats."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def read_hits(response: Mapping[str, Any], vector_field: str | None,
              fetched: str | None = None, keys: Mapping[int, str] | None = None,
              *, keyed: bool = False, other: str | None = None,
              named: str | None = None) -> list[Hit]:
    """The hits; a hit's vector from its source's `vector_field`, or from its `fields`
    under `fetched` (vectors read from doc values). `keyed`: each hit named by its doc key
    (a search that loaded no `_id`); `keys`: the doc keys a search asked for by sequence
    number, each hit with one of them named by it; `other`: the script field that holds
    each hit's `other_score`; `named`: the named query whose score it is (0 for a hit it
    does not match), read from `matched_queries` with their scores."""
    hits = []
    for hit in response["hits"]["hits"]:
        seq_no = hit.get("_seq_no")
        if keyed:
            doc = doc_key(seq_no)
        else:
            doc = keys.get(seq_no, hit["_id"]) if keys else hit["_id"]
        source = hit.get("_source", {})
        vector = None
        if vector_field is not None and vector_field in source:
            vector = np.asarray(source[vector_field], dtype=np.float32)
        values = hit.get("fields", {}).get(fetched) if fetched else None
        if values and values[0] is not None:  # one vector per doc, as a list of one
            vector = doc_values_vector(values[0])
        others = hit.get("fields", {}).get(other) if other else None
        other_score = float(others[0]) if others and others[0] is not None else None
        if named is not None:
            other_score = float(dict(hit.get("matched_queries") or {}).get(named, 0.0))
        # a search sorted by something else than the score has none
        hits.append(Hit(doc, float(hit.get("_score") or 0.0), source, vector,
                        hit.get("_index"), other_score))
    return hits
