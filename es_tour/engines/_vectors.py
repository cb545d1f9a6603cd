"""Stored vectors: read from `_source` where it holds them, else by the es-tour plugin's
script (base64 from Lucene's vectors).

A TOUR step reads the vectors of the docs it labels. Where `_source` holds them they are
read there: the engine sends a stored source as it is, and a source filter leaving the
vector out would make it parse and write every source again, which costs it more than the
vector's floats as JSON. Where `_source` lacks them, the plugin's `vector` script reads the
float32s from Lucene as one base64 string; where the script fails (no plugin), they come
from doc values the engine's own way; where it reads no vector for a hit (a Faiss field, or
a field the caller's field-level security hides), so do that caller's (`PluginReads`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

from es_tour.engines._hybrid import (
    PLUGIN_VECTOR_KEY,
    TOUR_VECTOR_SCRIPT,
    PluginReads,
    reason,
    script_failed,
)
from es_tour.engines._types import Hit, Similarity

log = logging.getLogger("es_tour.engines")


class StoredVectors(PluginReads):
    """The vector reads of an engine adapter (`ClientEngine`), one view's."""

    _vector_field: str | None
    _doc_value_vectors: str | None
    _plugin_vectors: bool  # whether `with_vector_field` may read them by the plugin's script
    # whether Lucene keeps a cosine field's vectors at unit length (Elasticsearch's)
    _unit_cosine_vectors: bool = False

    _view: Callable[[], Self]
    _search_hits: Callable[..., Awaitable[list[Hit]]]

    def with_vector_field(self, field: str, in_source: bool = True,
                          similarity: Similarity | None = None) -> Self:
        """This engine reading `field`'s stored vectors, into Hit.vector, wherever a call
        would return them in `_source`: from `_source`; for an index whose `_source` lacks
        them (`in_source` False), by the es-tour plugin's script where the index's nodes
        run it and Lucene holds the vectors as given (not an Elasticsearch field of
        `similarity` cosine, or of one unknown, whose vectors it keeps at unit length),
        else from doc values the engine's way (`_vector_request`)."""
        view = self._view()
        view._vector_field = field
        view._doc_value_vectors = None if in_source else field
        view._plugin_vectors = not self._unit_cosine_vectors or similarity == "dot_product"
        return view

    def _vectors_wanted(self, exclude: Sequence[str]) -> str | None:
        """The vector field to read when a call keeps every source field but `exclude`;
        None when this view knows none or the call drops it."""
        field = self._vector_field
        return field if field is not None and field not in exclude else None

    def _vector_request(self, field: str) -> tuple[dict[str, Any], str]:
        """The search body keys that return `field`'s vectors from doc values, and the key of
        `hit["fields"]` they come back under."""
        raise NotImplementedError

    async def _hits_with_vectors(self, index: str, body: dict[str, Any], field: str | None,
                                 vector_field: str | None, ids: Sequence[str] | None, *,
                                 keyed: bool = False) -> list[Hit]:
        """`body`'s hits (`_search_hits`, `keyed` as it takes it), each with `field`'s
        stored vector where given (`_asking_vectors`). Where the es-tour plugin's script
        fails (no plugin), the index's vectors are read without it from then on, this
        call's too; where it reads no vector for a hit (a Faiss field, say), so are this
        caller's."""
        asked, fetched = self._asking_vectors(index, body, field)
        if fetched != PLUGIN_VECTOR_KEY:
            return await self._search_hits(index, asked, vector_field, fetched, ids,
                                           keyed=keyed)
        try:
            hits = await self._search_hits(index, asked, vector_field, fetched, ids,
                                           keyed=keyed)
        except Exception as exc:  # each client's own error type, or a batch's EngineError
            if not script_failed(exc):
                raise
            log.warning("index [%s]: the es-tour plugin's vector script failed (%s): its "
                        "vectors are read without it from now on; is the plugin on every "
                        "node?", index, reason(exc))
            hits = None
        if hits is not None and all(hit.vector is not None for hit in hits):
            return hits
        if hits is None:
            self._untoured[index] = True
        else:
            log.info("index [%s]: a hit without a vector the es-tour plugin's script reads (a "
                     "Faiss field, a doc without one, or a field this caller may not see): "
                     "this caller's vectors are read from doc values without it from now on",
                     index)
            self._read_no_vector(index)
        return await self._hits_with_vectors(index, body, field, vector_field, ids,
                                             keyed=keyed)

    def _asking_vectors(self, index: str, body: dict[str, Any], field: str | None
                        ) -> tuple[dict[str, Any], str | None]:
        """`body` asking for `field`'s stored vectors, and the key of the hits' `fields`
        they come back under: `body` as is where its `_source` holds them (the engine sends
        a stored source as it is, and leaving the vector out makes it parse and write every
        source again, which costs it more than the vector's floats as JSON); for an index
        whose `_source` lacks them, the es-tour plugin's script, unless it failed on
        `index`, else the engine's own way; `body` as is and None for no field."""
        if field is None or field != self._doc_value_vectors:
            return body, None
        if self._plugin_vectors and self._plugin_reads(index):
            script = {**TOUR_VECTOR_SCRIPT, "params": {"f": field}}
            # script_fields alone would drop the source: keep it as the body asked
            return ({"_source": True, **body,
                     "script_fields": {PLUGIN_VECTOR_KEY: {"script": script}}},
                    PLUGIN_VECTOR_KEY)
        return self._doc_values_asked(body, field)

    def _doc_values_asked(self, body: dict[str, Any], field: str
                          ) -> tuple[dict[str, Any], str]:
        """`body` asking `field`'s vectors from doc values the engine's own way, and the key
        of the hits' `fields` they come back under."""
        extra, key = self._vector_request(field)
        # script_fields alone would drop the source: keep it as the body asked
        return {"_source": True, **body, **extra}, key
