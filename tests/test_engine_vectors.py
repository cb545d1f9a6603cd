"""Stored vectors (es_tour.engines._vectors): what a search body asks, from `_source` or by
the es-tour plugin's script, and how the script's base64 reads back."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from es_tour.engines import connect
from es_tour.engines._hits import doc_values_vector, read_hits
from es_tour.engines._hybrid import PLUGIN_VECTOR_KEY


def test_the_plugins_base64_reads_back_as_the_same_float32s_and_a_list_as_floats():
    vector = np.array([0.1, -2.5, 3e-7, 1 / 3], dtype=np.float32)
    written = base64.b64encode(vector.astype("<f4").tobytes()).decode()
    read = doc_values_vector(written)
    assert read.dtype == np.float32 and np.array_equal(read, vector)
    read.setflags(write=True)  # a TOUR step may move it: a copy, not the answer's buffer
    assert np.array_equal(doc_values_vector([0.5, -1.0]), [0.5, -1.0])
    hits = read_hits({"hits": {"hits": [{"_id": "a", "_score": 1.0, "_source": {"t": "x"},
                                          "fields": {PLUGIN_VECTOR_KEY: [written]}}]}},
                     None, PLUGIN_VECTOR_KEY)
    assert np.array_equal(hits[0].vector, vector)


@pytest.mark.parametrize(("engine", "similarity", "by_plugin"), [
    ("opensearch", "cosine", True), ("opensearch", None, True),
    ("elasticsearch", "dot_product", True),
    # Elasticsearch keeps a cosine field's Lucene vectors at unit length, not as given
    ("elasticsearch", "cosine", False), ("elasticsearch", None, False)])
async def test_a_fetch_reads_the_sources_vectors_and_the_plugins_script_where_it_lacks_them(
        engine, similarity, by_plugin):
    async with connect(engine, "http://localhost:1") as adapter:
        # the source holds them: the body as asked, no filter for the engine to apply
        view = adapter.with_vector_field("v", similarity=similarity)
        body = {"_source": {"excludes": ["t"]}}
        assert view._asking_vectors("i", body, "v") == (body, None)
        # an index whose source lacks them: the plugin's script, the source kept as asked
        doc_values = adapter.with_vector_field("v", in_source=False, similarity=similarity)
        asked, key = doc_values._asking_vectors("i", body, "v")
        if by_plugin:
            assert key == PLUGIN_VECTOR_KEY and asked["_source"] == {"excludes": ["t"]}
            script = asked["script_fields"][PLUGIN_VECTOR_KEY]["script"]
            assert script == {"lang": "tour", "source": "vector", "params": {"f": "v"}}
            assert doc_values._asking_vectors("i", {}, "v")[0]["_source"] is True
        else:
            assert key is not None and key != PLUGIN_VECTOR_KEY
        # its script failed on the index once: doc values, the engine's own way
        doc_values._untoured["i"] = True
        asked, key = doc_values._asking_vectors("i", {}, "v")
        assert key is not None and key != PLUGIN_VECTOR_KEY and asked["_source"] is True
