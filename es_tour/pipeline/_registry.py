"""The one registry of method names, the option that caps each one's labeler pairs,
and `build_method`, which checks a method's options once and adds fusion."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from es_tour.errors import ConfigError
from es_tour.options import field_names
from es_tour.pipeline._context import SearchContext
from es_tour.pipeline._first_stage import (
    Bm25Method,
    DepthOptions,
    FirstStageOptions,
    HybridLinearMethod,
    HybridRrfMethod,
    KnnMethod,
)
from es_tour.pipeline._fusion import FusedMethod
from es_tour.pipeline._rerank import (
    RerankHybridMethod,
    RerankMethod,
    VectorRerankMethod,
    VectorRerankOptions,
)
from es_tour.pipeline._tour_loop import RocchioOptions, RocchioUpdate, _tour, gradient_update
from es_tour.pipeline._types import (
    FusionWeights,
    SearchMethod,
)
from es_tour.tour import (
    TourConfig,
)

# final-score fusion's weights by the index settings' names -> FusionWeights' fields
FUSION_NAMES = {"bm25_weight": "w_bm25", "dense_weight": "w_dense"}

MethodFactory = Callable[[SearchContext, Mapping[str, Any]], SearchMethod]

# The one registry of method names: the pipeline's own here, the agents' added by
# `register_method` when `es_tour.agents` is imported (the entry points import it).
METHODS: dict[str, MethodFactory] = {
    "bm25": lambda ctx, o: Bm25Method(ctx, FirstStageOptions.from_mapping(o)),
    "knn": lambda ctx, o: KnnMethod(ctx, FirstStageOptions.from_mapping(o)),
    "hybrid-rrf": lambda ctx, o: HybridRrfMethod(ctx, FirstStageOptions.from_mapping(o)),
    "hybrid-linear": lambda ctx, o: HybridLinearMethod(ctx, FirstStageOptions.from_mapping(o)),
    "rerank": lambda ctx, o: RerankMethod(ctx, FirstStageOptions.from_mapping(o)),
    "rerank-hybrid": lambda ctx, o: RerankHybridMethod(ctx, DepthOptions.from_mapping(o)),
    "vector-rerank": lambda ctx, o: VectorRerankMethod(ctx, VectorRerankOptions.from_mapping(o)),
    "rocchio": lambda ctx, o: _tour(ctx, RocchioUpdate, RocchioOptions.from_mapping(o)),
    "tour-hard": lambda ctx, o: _tour(ctx, gradient_update,
                                      TourConfig.from_mapping({**o, "variant": "hard"})),
    "tour-soft": lambda ctx, o: _tour(ctx, gradient_update,
                                      TourConfig.from_mapping({**o, "variant": "soft"})),
}


# The option that caps each labelling method's labeler pairs per query: its budget, the
# axis on which methods are compared (`es-tour eval --budgets`). The methods missing here
# label nothing (bm25, knn, hybrid-rrf, hybrid-linear, vector-rerank); the agents add theirs.
BUDGET_OPTIONS: dict[str, str] = {
    "rerank": "k",  # the window labelled
    "rerank-hybrid": "k",  # k/2 from BM25 and k/2 from kNN
    "rocchio": "budget",
    "tour-hard": "budget",
    "tour-soft": "budget",
}


def register_method(name: str, factory: MethodFactory, budget_option: str | None = None
                    ) -> None:
    """Add a method family built on this package (the agents) to the registry, with the
    option that caps its labeler pairs per query, if it has one."""
    if METHODS.get(name, factory) is not factory:
        raise ValueError(f"method [{name}] is already registered")
    METHODS[name] = factory
    if budget_option is not None:
        BUDGET_OPTIONS[name] = budget_option


def build_method(
    name: str, context: SearchContext, options: Mapping[str, Any] | None = None
) -> SearchMethod:
    """The method called `name`, its options checked now rather than per query.

    Every labelling method also takes `bm25_weight` and `dense_weight` (the index settings'
    names; `w_bm25` and `w_dense`, their older spelling, still parse), the weights of
    final-score fusion (`FusedMethod`); both 0, the default, ranks by its own scores.
    """
    factory = METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown method [{name}]; choose one of: {', '.join(METHODS)}")
    own = field_names(options or {}, FUSION_NAMES)
    weights = FusionWeights(**{key: own.pop(key) for key in ("w_bm25", "w_dense")
                               if key in own})
    method = factory(context, own)
    if not weights.active:
        return method
    if name not in BUDGET_OPTIONS:
        raise ConfigError(f"bm25_weight and dense_weight fuse the labeler's scores; [{name}] "
                          "labels nothing")
    return FusedMethod(method, context, weights)
