"""Stored vectors read by the es-tour plugin's script: base64 from Lucene's vectors.

A TOUR step reads the vectors of the docs it labels. In `_source`, a 384-d vector is
hundreds of floats the engine writes out as JSON, most of a text fetch's engine CPU; the
plugin's `vector` script reads the same float32s from Lucene and writes one base64 string. Where
the script fails (no plugin), the index's vectors come from `_source`, or from doc values the
engine's own way where `_source` lacks them; where it reads no vector for a hit (a Faiss
field, or a field the caller's field-level security hides), so do that caller's
(`PluginReads`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
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


def source_without(source: Any, field: str) -> Any:
    """A search body's `_source` (True, False, or includes and excludes) leaving `field`
    out; False where it kept `field` alone."""
    if source is False:
        return False
    if not isinstance(source, Mapping):
        return {"excludes": [field]}
    kept = dict(source)
    if "includes" in kept:
        kept["includes"] = [name for name in kept["includes"] if name != field]
        if not kept["includes"]:
            return False
    kept["excludes"] = [*kept.get("excludes", []), field]
    return kept


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
        would return them in `_source`: by the es-tour plugin's script where the index's
        nodes run it and Lucene holds the vectors as the source gives them (not an
        Elasticsearch field of `similarity` cosine, or of one unknown, whose vectors it
        keeps at unit length); else from `_source`, or for an index whose `_source` lacks
        them (`in_source` False), from doc values the engine's way (`_vector_request`)."""
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
                                 vector_field: str | None, ids: Sequence[str] | None
                                 ) -> list[Hit]:
        """`body`'s hits (`_search_hits`), each with `field`'s stored vector where given
        (`_asking_vectors`). Where the es-tour plugin's script fails (no plugin) or reads
        no vector for a hit (a Faiss field, say), the index's vectors are read without it
        from then on, this call's too."""
        asked, fetched = self._asking_vectors(index, body, field)
        if fetched != PLUGIN_VECTOR_KEY:
            return await self._search_hits(index, asked, vector_field, fetched, ids)
        try:
            hits = await self._search_hits(index, asked, vector_field, fetched, ids)
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
                     "this caller's vectors are read from `_source` from now on", index)
            self._read_no_vector(index)
        return await self._hits_with_vectors(index, body, field, vector_field, ids)

    def _asking_vectors(self, index: str, body: dict[str, Any], field: str | None
                        ) -> tuple[dict[str, Any], str | None]:
        """`body` asking for `field`'s stored vectors, and the key of the hits' `fields`
        they come back under: the es-tour plugin's script, unless it failed on `index`;
        else `body` as is (its `_source` holds them) or, for an index whose `_source` lacks
        them, the engine's own way; `body` as is and None for no field."""
        if field is None:
            return body, None
        if self._plugin_vectors and self._plugin_reads(index):
            script = {**TOUR_VECTOR_SCRIPT, "params": {"f": field}}
            return ({**body, "_source": source_without(body.get("_source", True), field),
                     "script_fields": {PLUGIN_VECTOR_KEY: {"script": script}}},
                    PLUGIN_VECTOR_KEY)
        if field != self._doc_value_vectors:
            return body, None
        return self._doc_values_asked(body, field)

    def _doc_values_asked(self, body: dict[str, Any], field: str
                          ) -> tuple[dict[str, Any], str]:
        """`body` asking `field`'s vectors from doc values the engine's own way, and the key
        of the hits' `fields` they come back under."""
        extra, key = self._vector_request(field)
        # script_fields alone would drop the source: keep it as the body asked
        return {"_source": True, **body, **extra}, key
