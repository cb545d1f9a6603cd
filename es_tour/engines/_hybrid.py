"""Hybrid legs: a BM25 leg and a kNN leg that each bring the other's score of their hits.

A hybrid pool ranks the union of both legs by both scores: asked apart, each leg's docs then
lack the other's score, and a second round trip asks for it. Asked together, a script field
gives every hit its q·c, and the kNN leg, rescored by the lexical query alone, its BM25. The
script is the es-tour plugin's (`tour` language: the field's Lucene vectors, the query
vector read once per search) where the engine has it, else painless on OpenSearch. Where no
script can (Elasticsearch without the plugin: its painless vector functions serve score
scripts only), the kNN leg's hits get their BM25 from a named query, and the BM25 leg's a
q·c only once its docs are known. Either way, a round that moves only the vector runs no
BM25 again: it asks the q·c of the BM25 top it already has.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np
from cachetools import LRUCache

from es_tour.engines._batch import identity
from es_tour.engines._json import wire_vector
from es_tour.engines._keys import constrained, ids_query
from es_tour.engines._types import Hit, Overview, Similarity, key_seq_no

log = logging.getLogger("es_tour.engines")

# the script field that gives a hybrid leg's hits their other score
_OTHER_SCORE = "_tour_other_score"
# the named query that gives a kNN leg's hits their BM25 where no script field can
_LEXICAL = "_tour_lexical"
# the es-tour plugin's script giving a hit q·c (plugin/src/main/java/.../SimilarityScriptEngine)
TOUR_SCRIPT = {"lang": "tour", "source": "similarity"}
# the plugin's script giving each hit its stored vector, base64 of little-endian float32s
TOUR_VECTOR_SCRIPT = {"lang": "tour", "source": "vector"}
PLUGIN_VECTOR_KEY = "_tour_stored_vector"  # the hits' `fields` key it answers under


class PluginReads:
    """Where an engine adapter's view asks the es-tour plugin's scripts (`ClientEngine`)."""

    # indices where the plugin's scripts failed (no plugin): asked without them from then on
    _untoured: LRUCache[str, bool]
    # (index, identity) where they read no vector for a hit this identity searched: a Faiss
    # field, a doc without one, or a field its field-level security hides; per identity,
    # so that one caller's security never changes how another's searches are asked
    _vectorless: LRUCache[tuple[str, str], bool]
    _headers: dict[str, str] | None

    def _plugin_reads(self, index: str) -> bool:
        return (index not in self._untoured
                and (index, identity(self._headers)) not in self._vectorless)

    def _read_no_vector(self, index: str) -> None:
        self._vectorless[index, identity(self._headers)] = True


class HybridLegs(PluginReads):
    """The hybrid legs of an engine adapter (`ClientEngine`)."""

    _sharded: LRUCache[str, bool]
    # indices where the legs' painless script failed (painless off, say): asked without it
    _unscripted: LRUCache[str, bool]
    # whether a hit's `matched_queries` can bring each named query's score: the legs are
    # then asked with the kNN leg's BM25 named where no script gives the other scores
    _legs_by_named_query = False

    unsharded_search: Callable[..., Awaitable[list[Hit] | None]]
    _constraints: Callable[[Sequence[str] | None], list[Mapping[str, Any]]]
    _knn_clause: Callable[..., dict[str, Any]]

    async def hybrid_legs(
        self,
        index: str,
        vector: np.ndarray,
        lexical: Mapping[str, Any],
        k: int,
        *,
        field: str,
        similarity: Similarity,
        num_candidates: int,
        lexical_top: Sequence[Hit] | None = None,
        overview: Overview | None = None,
        dense: bool = True,
    ) -> tuple[list[Hit], list[Hit]] | None:
        """The query DSL `lexical`'s top k and the kNN's top k for `vector`, doc keys and
        scores, each hit with the other retriever's score of it (`Hit.other_score`): both in
        one round trip, where a hybrid pool would ask each leg's missing scores in a second.
        A script field gives each hit its q·c (cosine for a cosine field): the es-tour
        plugin's, else painless; the kNN leg is rescored by `lexical` alone, which gives its
        BM25 (0 where no term matches). Where neither script runs, `_named_legs`.
        `lexical_top`, `lexical`'s top k known already (doc keys or `_id`s, with their
        BM25), is not scored again: a round that moved only the vector asks its docs' q·c
        alone. `overview`, where `lexical` is
        the request's own query, is counted by the lexical leg (`unsharded_search`). `dense`
        False: the lexical leg alone, by a script (no kNN leg: its hits are empty). None
        where neither can, or `index` spans several shards (each shard's top k would be
        rescored apart)."""
        if index in self._sharded:
            return None
        unit = wire_vector(vector)
        painless = self._dense_script(similarity)
        if self._plugin_reads(index):
            script: dict[str, Any] = TOUR_SCRIPT
        elif painless is not None and index not in self._unscripted:
            script = {"source": painless}
        else:
            if not self._legs_by_named_query or not dense:
                return None
            return await self._named_legs(index, unit, lexical, k, field, num_candidates,
                                          lexical_top, overview)
        legs = await self._scripted_legs(index, script, unit, lexical, k, field,
                                         num_candidates, lexical_top, overview, dense)
        if legs is None and script is TOUR_SCRIPT:  # the plugin's failed: without it
            return await self.hybrid_legs(index, vector, lexical, k, field=field,
                                          similarity=similarity,
                                          num_candidates=num_candidates,
                                          lexical_top=lexical_top, overview=overview,
                                          dense=dense)
        return legs

    async def _scripted_legs(self, index: str, script: dict[str, Any], unit: np.ndarray,
                             lexical: Mapping[str, Any], k: int, field: str,
                             num_candidates: int, lexical_top: Sequence[Hit] | None,
                             overview: Overview | None, dense: bool = True
                             ) -> tuple[list[Hit], list[Hit]] | None:
        """`hybrid_legs` with `script` giving each hit its q·c; None where the script
        failed, which then marks the index to be asked without it. The plugin's script
        also marks it where a hit got no q·c: its field's vectors are not Lucene's (an
        OpenSearch Faiss field), or some docs lack one, which painless tells alike."""
        scripted = {"script_fields": {_OTHER_SCORE: {"script": {
            **script, "params": {"f": field, "q": unit}}}}}
        constraints = self._constraints(None)
        if lexical_top is None:
            sparse_leg = self.unsharded_search(
                index, {"size": k, "query": constrained(lexical, constraints), **scripted},
                _OTHER_SCORE, overview=overview)
        elif lexical_top:  # its hits and their BM25 known: their q·c alone, no BM25 scoring
            sparse_leg = self.unsharded_search(
                index, {"size": len(lexical_top),
                        "query": ids_query([hit.id for hit in lexical_top]), **scripted},
                _OTHER_SCORE)
        else:
            sparse_leg = _no_hits()
        rescored = {"window_size": k, "query": {"rescore_query": lexical, "query_weight": 0,
                                               "rescore_query_weight": 1}}
        knn = self._knn_clause(unit, k, num_candidates, field, constraints)
        dense_leg = self.unsharded_search(
            index, {"size": k, "query": knn, "rescore": rescored, **scripted},
            _OTHER_SCORE) if dense else _no_hits()
        sparse, dense_hits = await asyncio.gather(sparse_leg, dense_leg, return_exceptions=True)
        for answer in (sparse, dense_hits):
            if isinstance(answer, BaseException):
                if not script_failed(answer):
                    raise answer
                if script is TOUR_SCRIPT:
                    self._untoured[index] = True
                    log.warning("index [%s]: the es-tour plugin's script failed (%s): its "
                                "hybrid legs go without it from now on; is the plugin on "
                                "every node?", index, reason(answer))
                else:
                    self._unscripted[index] = True  # the legs are asked apart from now on
                return None
        if not isinstance(sparse, list) or not isinstance(dense_hits, list):
            return None
        if script is TOUR_SCRIPT and any(hit.other_score is None
                                         for hit in sparse + dense_hits):
            self._read_no_vector(index)  # painless, or the named legs, from the next search
            log.info("index [%s]: a hit without a vector the es-tour plugin's script reads "
                     "(a Faiss field, a doc without one, or a field this caller may not see): "
                     "this caller's hybrid legs go without it", index)
        if lexical_top is not None:
            sparse = _with_other_scores(lexical_top, {hit.id: hit.other_score for hit in sparse})
        # the kNN leg comes ordered by BM25: its own order is by q·c
        by_vector = [Hit(hit.id, hit.other_score or 0.0, index=hit.index, other_score=hit.score)
                     for hit in dense_hits]
        return sparse, sorted(by_vector, key=lambda hit: -hit.score)

    async def _named_legs(self, index: str, unit: np.ndarray, lexical: Mapping[str, Any],
                          k: int, field: str, num_candidates: int,
                          lexical_top: Sequence[Hit] | None, overview: Overview | None
                          ) -> tuple[list[Hit], list[Hit]] | None:
        """The legs in one round trip where no script gives their other scores: the kNN
        leg's hits their BM25 from `lexical` as a named post filter (beside `match_all`,
        so that it keeps every hit); the lexical leg as asked, its hits without q·c, or,
        for `lexical_top` (doc keys), their q·c from a kNN restricted to them."""
        constraints = self._constraints(None)
        named = {"bool": {"should": [{"bool": {"must": [lexical], "_name": _LEXICAL}},
                                     {"match_all": {}}]}}
        knn = self._knn_clause(unit, k, num_candidates, field, constraints)
        dense_leg = self.unsharded_search(index, {"size": k, "query": knn,
                                                  "post_filter": named}, named=_LEXICAL)
        if lexical_top is None:
            sparse, dense = await asyncio.gather(
                self.unsharded_search(index, {"size": k, "query": constrained(
                    lexical, constraints)}, named_scores=True, overview=overview),
                dense_leg)
            return (sparse, dense) if sparse is not None and dense is not None else None
        seq_nos = [key_seq_no(hit.id) for hit in lexical_top]
        if not seq_nos or None in seq_nos:  # none known by doc key: the pool asks their q·c
            dense = await dense_leg
            return None if dense is None else (list(lexical_top), dense)
        restricted = self._knn_clause(unit, len(seq_nos), max(len(seq_nos), num_candidates),
                                      field, [*constraints, {"terms": {"_seq_no": seq_nos}}])
        scored, dense = await asyncio.gather(
            self.unsharded_search(index, {"size": len(seq_nos), "query": restricted},
                                  named_scores=True), dense_leg)
        if scored is None or dense is None:
            return None
        return _with_other_scores(lexical_top, {hit.id: hit.score for hit in scored}), dense

    def _dense_script(self, similarity: Similarity) -> str | None:
        """A script field's source giving a hit q·c (params.q, the query vector, against
        the vector field params.f) for a field of `similarity`; None where this engine has
        none (Elasticsearch's vector functions serve score scripts only)."""
        return None

    async def _field_similarity(self, index: str, field: str) -> Similarity | None:
        """How `field`'s kNN compares vectors, from its mapping, where this engine can ask
        the legs together (`_dense_script` or `_named_legs`); None otherwise, or where the
        caller may not read the mapping."""
        return None


def _with_other_scores(hits: Sequence[Hit], other: Mapping[str, float | None]) -> list[Hit]:
    """`hits` as they are, each with its score by the other retriever, where `other` has it
    (a doc deleted or changed since it was ranked has none: the pool asks it after)."""
    return [Hit(hit.id, hit.score, index=hit.index, other_score=other.get(hit.id))
            for hit in hits]


async def _no_hits() -> list[Hit]:
    return []


def _error_body(error: BaseException) -> object:
    """What the engine answered with an error: its body (es-tour's and Elasticsearch's
    errors) or info (OpenSearch's)."""
    return getattr(error, "body", None) or getattr(error, "info", None)


def reason(error: BaseException) -> str:
    """An engine error's first root cause, for a log line."""
    body = _error_body(error)
    found = body.get("error") if isinstance(body, dict) else None
    if isinstance(found, dict):
        causes = found.get("root_cause") or [found]
        return str(causes[0].get("reason") or causes[0].get("type"))
    return str(error)


def script_failed(error: BaseException) -> bool:
    """Whether an engine error is a script's (not compiled, not allowed, a language the
    engine lacks), not the query's."""
    body = str(_error_body(error))
    return "script_exception" in body or "script_lang not supported" in body
