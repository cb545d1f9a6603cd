"""The plan of one search: pass it through, and why, or refine it, and how.

`servable` reads a request against its index's settings: the `SearchRequest` the sidecar
refines, or a `Passthrough` with its reason from the one table (`_passthrough`).
`Planner.plan` turns a servable request into a `RefinePlan`: the method and its options
resolved (request > index > server), its models loaded, the index's vector field checked
against the encoder, the caller's view of the engine with the request's filters, and every
option checked against the server's caps, all before a slot is taken or a round runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cachetools import TTLCache

from es_tour.engines import ClientEngine, VectorField
from es_tour.errors import ConfigError, EsTourError
from es_tour.pipeline import CallerDocs, ModelPool, SearchContext, SearchMethod, VectorStore
from es_tour.server._config import ServerConfig
from es_tour.server._fetch import hides_ids
from es_tour.server._models import Models
from es_tour.server._options import (
    Resolved,
    build,
    check_encoder_fits,
    index_settings,
    layered_text_fields,
    resolve,
)
from es_tour.server._passthrough import Passthrough, Reason
from es_tour.server._request import SearchRequest, parse_search, wants_tour

# methods whose ranking is the engine's own for the request's query
ENGINE_ORDER = frozenset({"bm25"})
MAX_RESULT_WINDOW = 10_000  # the engines' default index.max_result_window
# how long what an index's vector field holds (dimension, in `_source` or not) is kept: it
# cannot change while the index lives, but the name may be given to a new index
VECTOR_FIELD_TTL_S = 60.0


def enabled(settings: Mapping[str, Any] | None) -> bool:
    """Whether the index asked for refinement (`index.tour.enabled`)."""
    return str((settings or {}).get("index.tour.enabled", "false")).lower() == "true"


def servable(index: str, params: Mapping[str, str], body: Mapping[str, Any],
             settings: Mapping[str, Any] | None, default_text_fields: Any) -> SearchRequest:
    """The search as the sidecar runs it; Passthrough with the reason it does not; a
    ConfigError where the request asked for ext.tour and cannot have it."""
    explicit = wants_tour(body)
    if not explicit and not enabled(settings):
        raise Passthrough(Reason.NOT_ENABLED)
    tour = body.get("ext", {}).get("tour", {}) if explicit else {}
    text_fields = layered_text_fields(tour if isinstance(tour, Mapping) else {},
                                      index_settings(settings or {}), default_text_fields)
    try:
        search = parse_search(index, params, body, explicit=explicit, text_fields=text_fields)
        limit = int((settings or {}).get("index.max_result_window", MAX_RESULT_WINDOW))
        if search.from_ + search.size > limit:
            raise Passthrough(Reason.PAST_RESULT_WINDOW, limit=limit)
        return search
    except Passthrough as verdict:
        if explicit:  # the engine would reject ext.tour; say why the sidecar did not serve it
            raise _unservable(verdict.reason) from None
        raise


def _unservable(reason: str) -> EsTourError:
    return ConfigError(f"ext.tour cannot be served for this request ({reason}); "
                       "drop ext.tour to run it as a plain search")


@dataclass(frozen=True)
class RefinePlan:
    """How one search is refined: the method built with its options, the context it runs
    in, and the deadline its rounds have."""

    request: SearchRequest
    text: str  # the request's query text: what the method refines
    chosen: Resolved  # the method, its options and where each came from
    engine: ClientEngine  # the caller's view: every call carries the caller's identity
    context: SearchContext  # the engine filtered by the request's filters, models, pool
    method: SearchMethod
    deadline_ms: int

    @property
    def as_the_engine_ranks(self) -> bool:
        """Whether the method orders as the engine orders the request's own query (bm25
        runs it as written): the engine's answer to the request as sent is the method's,
        in one call. Not for hits asked without their `_id`, which the trace names."""
        return (self.chosen.method in ENGINE_ORDER and self.request.lexical is not None
                and not hides_ids(self.request.body))


class Planner:
    """Plans the searches of one sidecar: its config, models and model pool, and what each
    index's vector field holds (read from one doc, kept a while)."""

    def __init__(self, config: ServerConfig, models: Models, pool: ModelPool):
        self._config = config
        self._models = models
        self._pool = pool
        # (index, field) -> what it holds; bounded like the settings cache
        self._vector_fields: TTLCache[tuple[str, str], VectorField] = TTLCache(
            maxsize=config.settings_cache_size, ttl=VECTOR_FIELD_TTL_S)

    async def plan(self, request: SearchRequest, flat_settings: dict[str, Any] | None,
                   engine: ClientEngine, store: VectorStore | None,
                   fetched_docs: CallerDocs | None = None) -> RefinePlan:
        """The plan of `request` on an index with `flat_settings`, its engine calls made
        through `engine` (the caller's view), the docs the caller's earlier searches
        fetched in `fetched_docs`; a ConfigError (400) for what cannot run."""
        config = self._config
        chosen = resolve(request.tour, index_settings(flat_settings or {}), config.defaults())
        if request.vector_field is not None and "vector_field" not in request.tour:
            chosen = replace(chosen, vector_field=request.vector_field)
        assert request.text is not None  # a servable request has one
        # a first use loads the model from disk: seconds the event loop must not wait
        models = self._models
        encoder, labeler = await asyncio.to_thread(
            lambda: (models.query_encoder(chosen.encoder), models.labeler(chosen.labeler)))
        vectors = await self._vector_field(engine, request.index, chosen, encoder.dimension)
        searcher = engine.with_filters(request.filters).with_vector_field(
            vectors.name, vectors.in_source, vectors.similarity)
        # the request's own vector, if it brought one; else its embedding, kept: past the
        # deadline, round 0 reuses it rather than queue behind the encoder
        given = {} if request.vector is None else {request.text: request.vector}
        context = SearchContext(searcher, request.index, encoder, labeler, chosen.text_fields,
                                chosen.vector_field, self._pool, config.label_batch,
                                request.lexical, store, query_vectors=given,
                                vector_similarity=vectors.similarity,
                                fetched_docs=fetched_docs)
        # every option checked here; a learned policy is read from disk: off the loop too
        # its pool legs may name docs by doc key: the page resolves those it shows
        method = await asyncio.to_thread(build, chosen.method, context, chosen.options,
                                         by_id=False)
        self._check_caps(request, chosen, encoder.dimension)
        return RefinePlan(request, request.text, chosen, engine, context, method,
                          request.timeout_ms or config.deadline_ms)

    async def _vector_field(self, engine: ClientEngine, index: str, chosen: Resolved,
                            dimension: int) -> VectorField:
        """The index's vector field, read from one doc and cached (no caller's answer depends
        on who read it); a 400 naming both dimensions when the encoder's differs from it."""
        key = (index, chosen.vector_field)
        found = self._vector_fields.get(key)
        if found is None:
            with engine.engine_errors():
                found = await engine.vector_field(index, chosen.vector_field)
            if found.dimension is not None:  # an index with no vector yet is asked again
                self._vector_fields[key] = found
        check_encoder_fits(found, chosen.encoder, dimension, index)
        return found

    def _check_caps(self, request: SearchRequest, chosen: Resolved, dimension: int) -> None:
        """A 400 for an option past the server's maximum, or a query vector the encoder's
        dimension does not fit."""
        c = self._config
        caps = (("k", chosen.options.get("k"), c.max_k),
                ("window", chosen.window, c.max_size),
                ("max_rounds", chosen.options.get("max_rounds"), c.max_rounds),
                ("top_k", chosen.options.get("top_k"), c.max_top_k),
                ("timeout_ms", request.timeout_ms, c.max_timeout_ms))
        for name, value, limit in caps:
            if isinstance(value, int) and value > limit:
                raise ConfigError(f"{name} [{value}] is past this server's maximum [{limit}]")
        if request.vector is not None:
            if request.vector.shape != (dimension,):
                raise ConfigError(f"query vector has {request.vector.shape[0]} dimensions; the "
                                  f"encoder [{chosen.encoder}]'s have {dimension}")
