"""The one registry of method names, the option that caps each one's labeler pairs,
and `build_method`, which checks a method's options once and adds fusion."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from es_tour.engines import key_seq_no
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
    RoundTrace,
    SearchMethod,
    SearchResult,
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
    name: str, context: SearchContext, options: Mapping[str, Any] | None = None, *,
    by_id: bool = True,
) -> SearchMethod:
    """The method called `name`, its options checked now rather than per query.

    Every labelling method also takes `bm25_weight` and `dense_weight` (the index settings'
    names; `w_bm25` and `w_dense`, their older spelling, still parse), the weights of
    final-score fusion (`FusedMethod`); both 0, the default, ranks by its own scores.
    `by_id`: its hits name docs by `_id`; otherwise some may name one by its doc key, and
    the caller resolves those it shows (`with_doc_ids`), as the sidecar does a page's.
    """
    method = _built(name, context, options)
    return NamedById(method, context) if by_id else method


def _built(name: str, context: SearchContext, options: Mapping[str, Any] | None
           ) -> SearchMethod:
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


class NamedById:
    """A method whose hits and trace name each doc by its `_id`, whatever its pool legs
    named them by (`with_doc_ids`)."""

    def __init__(self, inner: SearchMethod, context: SearchContext):
        self.inner = inner
        self.context = context
        self.name = inner.name

    async def search(self, query: str, size: int = 10) -> SearchResult:
        return await with_doc_ids(await self.inner.search(query, size), self.context)


async def with_doc_ids(result: SearchResult, context: SearchContext,
                       docs: Sequence[str] | None = None) -> SearchResult:
    """`result` with the doc keys among `docs` (every hit's, by default) resolved to
    `_id`s, in one search at most, and every id its hits and rounds hold that the context's
    engine view has met named by its `_id`; a key none has met stays as it is."""
    wanted = [hit.id for hit in result.hits] if docs is None else list(docs)
    if all(key_seq_no(doc) is None for doc in (*wanted, *(hit.id for hit in result.hits))):
        return result  # its pool legs named every doc by `_id`
    await context.engine.doc_ids(context.index, wanted)
    known = context.engine.known_id
    return replace(result,
                   hits=[replace(hit, id=known(hit.id)) for hit in result.hits],
                   rounds=[_named_by_id(trace, known) for trace in result.rounds],
                   lexical_scores={known(doc): score
                                   for doc, score in result.lexical_scores.items()})


def _named_by_id(trace: RoundTrace, known: Callable[[str], str]) -> RoundTrace:
    """`trace` with each list of doc ids it holds (a ranking, the docs labelled, those that
    entered and left an answer) named by `known`."""
    def renamed(value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return [known(item) for item in value]
        if isinstance(value, dict) and all(isinstance(item, list) for item in value.values()):
            return {key: renamed(item) for key, item in value.items()}
        return value

    return replace(trace, **{f.name: renamed(getattr(trace, f.name)) for f in fields(trace)
                             if f.init and f.name != "timings"})
