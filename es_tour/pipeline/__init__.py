"""Search methods over an engine: retrieval, reranking, Rocchio and TOUR, with traces."""

from __future__ import annotations

from es_tour.pipeline._context import ModelPool, SearchContext, open_context
from es_tour.pipeline._methods import (
    METHODS,
    MethodFactory,
    SearchMethod,
    build_method,
    register_method,
)
from es_tour.pipeline._types import (
    Provenance,
    RankedHit,
    RoundTrace,
    SearchResult,
    Timings,
)

__all__ = [
    "METHODS",
    "MethodFactory",
    "ModelPool",
    "Provenance",
    "RankedHit",
    "RoundTrace",
    "SearchContext",
    "SearchMethod",
    "SearchResult",
    "Timings",
    "build_method",
    "open_context",
    "register_method",
]
