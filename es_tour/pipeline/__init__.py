"""Search methods over an engine: retrieval, reranking, Rocchio and TOUR, with traces."""

from __future__ import annotations

from es_tour.pipeline._context import ModelPool, SearchContext, open_context
from es_tour.pipeline._methods import (
    BUDGET_OPTIONS,
    LEXICAL_WEIGHT,
    LINEAR_DEPTH,
    METHODS,
    MethodFactory,
    MethodOptions,
    SearchMethod,
    build_method,
    interleave,
    rank_linear,
    register_method,
)
from es_tour.pipeline._types import (
    Provenance,
    RankedHit,
    RoundTrace,
    SearchResult,
    Timings,
    TourRound,
    label_mass,
    trace_dict,
)
from es_tour.pipeline._vector_store import STORE_PREFIX, StoreCounts, VectorStore, store_index

__all__ = [
    "BUDGET_OPTIONS",
    "LEXICAL_WEIGHT",
    "LINEAR_DEPTH",
    "METHODS",
    "STORE_PREFIX",
    "MethodFactory",
    "MethodOptions",
    "ModelPool",
    "Provenance",
    "RankedHit",
    "RoundTrace",
    "SearchContext",
    "SearchMethod",
    "SearchResult",
    "StoreCounts",
    "Timings",
    "TourRound",
    "VectorStore",
    "build_method",
    "interleave",
    "label_mass",
    "open_context",
    "rank_linear",
    "register_method",
    "store_index",
    "trace_dict",
]
