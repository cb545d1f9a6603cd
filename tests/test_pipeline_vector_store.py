"""The vector store's records: exact vectors, keys that separate indices, docs and texts,
and store names the engines accept."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np

from es_tour.models import doc_key
from es_tour.pipeline import STORE_PREFIX, store_index
from es_tour.pipeline._vector_store import decode_vector, encode_vector, record_id


def test_a_vector_comes_back_bit_for_bit() -> None:
    vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    np.testing.assert_array_equal(decode_vector(encode_vector(vector)), vector)


def test_records_of_another_index_doc_or_text_are_other_records() -> None:
    base = record_id(doc_key("a", "1", "text"))
    assert base == record_id(doc_key("a", "1", "text"))
    others = {record_id(doc_key("b", "1", "text")), record_id(doc_key("a", "2", "text")),
              record_id(doc_key("a", "1", "text changed")), record_id(doc_key("a1", "", "text"))}
    assert base not in others and len(others) == 4


def test_a_store_name_is_a_valid_index_name_per_labeler_and_model() -> None:
    one = store_index(SimpleNamespace(store_name="BGE Small/v1.5", fingerprint="abc123"))  # type: ignore[arg-type]
    other = store_index(SimpleNamespace(store_name="BGE Small/v1.5", fingerprint="def456"))  # type: ignore[arg-type]
    assert one.startswith(STORE_PREFIX) and one != other
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", one)
