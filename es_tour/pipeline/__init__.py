"""Search methods over an engine: retrieval, reranking, Rocchio and TOUR, with traces."""

from __future__ import annotations

from es_tour.pipeline._context import SearchContext, open_context
from es_tour.pipeline._methods import METHODS, SearchMethod, build_method
from es_tour.pipeline._types import (
    Provenance,
    RankedHit,
    RoundTrace,
    SearchResult,
    Timings,
)

__all__ = [
    "METHODS",
    "Provenance",
    "RankedHit",
    "RoundTrace",
    "SearchContext",
    "SearchMethod",
    "SearchResult",
    "Timings",
    "build_method",
    "open_context",
]
