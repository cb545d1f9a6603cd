"""Search methods over an engine: retrieval, reranking, Rocchio, relevance feedback and TOUR,
with traces."""

from __future__ import annotations

from es_tour.pipeline._context import (
    DEFAULT_TEXT_FIELDS,
    ModelPool,
    SearchContext,
    doc_text,
    knn_candidates,
    open_context,
)
from es_tour.pipeline._doc_cache import (
    DOC_CACHE_MIB,
    DOC_CACHE_TTL_S,
    DOC_PRELOAD_DOCS,
    CallerDocs,
    DocCache,
    FetchedDoc,
)
from es_tour.pipeline._first_stage import (
    LEXICAL_WEIGHT,
    LINEAR_DEPTH,
    interleave,
    linear_scores,
    rank_linear,
)
from es_tour.pipeline._registry import (
    BUDGET_OPTIONS,
    FUSION_NAMES,
    METHODS,
    MethodFactory,
    build_method,
    register_method,
    with_doc_ids,
)
from es_tour.pipeline._relevance_feedback import (  # registers relevance-feedback
    RelevanceFeedbackOptions,
)
from es_tour.pipeline._types import (
    MethodOptions,
    Provenance,
    RankedHit,
    RoundTrace,
    SearchMethod,
    SearchResult,
    Timings,
    TourRound,
    label_mass,
    trace_dict,
)
from es_tour.pipeline._vector_store import (
    PRELOAD_DOCS,
    STORE_PREFIX,
    StoreCounts,
    VectorStore,
    store_index,
)
from es_tour.pipeline._warm import WarmReport, warm

__all__ = [
    "BUDGET_OPTIONS",
    "DEFAULT_TEXT_FIELDS",
    "DOC_CACHE_MIB",
    "DOC_CACHE_TTL_S",
    "DOC_PRELOAD_DOCS",
    "FUSION_NAMES",
    "LEXICAL_WEIGHT",
    "LINEAR_DEPTH",
    "METHODS",
    "PRELOAD_DOCS",
    "STORE_PREFIX",
    "CallerDocs",
    "DocCache",
    "FetchedDoc",
    "MethodFactory",
    "MethodOptions",
    "ModelPool",
    "Provenance",
    "RankedHit",
    "RelevanceFeedbackOptions",
    "RoundTrace",
    "SearchContext",
    "SearchMethod",
    "SearchResult",
    "StoreCounts",
    "Timings",
    "TourRound",
    "VectorStore",
    "WarmReport",
    "build_method",
    "doc_text",
    "interleave",
    "knn_candidates",
    "label_mass",
    "linear_scores",
    "open_context",
    "rank_linear",
    "register_method",
    "store_index",
    "trace_dict",
    "warm",
    "with_doc_ids",
]
