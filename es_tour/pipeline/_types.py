"""Typed results of a search method (hits, a round-by-round trace, costs and timings), and
the types every method family and fusion share: the method protocol, its options' base and
the fusion weights."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, Protocol

from es_tour.options import check_number, from_options


@dataclass
class Timings:
    """Milliseconds spent in the engine, in the models, and in es-tour's own code."""

    engine_ms: float = 0.0
    model_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def own_ms(self) -> float:
        return max(self.total_ms - self.engine_ms - self.model_ms, 0.0)

    def engine(self) -> AbstractContextManager[None]:
        return self._clock("engine_ms")

    def model(self) -> AbstractContextManager[None]:
        return self._clock("model_ms")

    @contextmanager
    def _clock(self, attribute: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(
                self, attribute, getattr(self, attribute) + (time.perf_counter() - start) * 1000
            )

    def to_dict(self) -> dict[str, float]:
        return {
            "engine_ms": round(self.engine_ms, 3),
            "model_ms": round(self.model_ms, 3),
            "own_ms": round(self.own_ms, 3),
            "total_ms": round(self.total_ms, 3),
        }


RETRIEVERS = ("bm25", "knn")  # what `RankedHit.retrieved_by` may name


@dataclass(frozen=True)
class RankedHit:
    """A document in a method's final ranking.

    round: the round whose retrieval first returned it; retrieved_by: which retrievers
    ("bm25", "knn") ever returned it; label: the labeler's φ, when it was scored.
    """

    id: str
    score: float
    source: dict[str, Any] = field(default_factory=dict)
    round: int | None = None
    retrieved_by: tuple[str, ...] = ()
    label: float | None = None

    def trace(self) -> dict[str, Any]:
        """Where the hit came from, as `ext.tour.hits` shows it."""
        return {"_id": self.id, "round": self.round, "retrieved_by": list(self.retrieved_by),
                "label": self.label}


class Provenance:
    """Which round first retrieved each doc, and which retrievers returned it."""

    def __init__(self) -> None:
        self._round: dict[str, int] = {}
        self._by: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._round)

    def add(self, round_no: int, ids: Iterable[str], retriever: str) -> int:
        """Record a retrieval of `ids` in round `round_no`; returns how many were new."""
        assert retriever in RETRIEVERS, retriever
        new = 0
        for doc in ids:
            if doc not in self._round:
                self._round[doc] = round_no
                new += 1
            self._by.setdefault(doc, set()).add(retriever)
        return new

    def stamp(self, hit: RankedHit, labels: Mapping[str, float]) -> RankedHit:
        """`hit` with its first round, its retrievers and its label (when scored)."""
        label = labels.get(hit.id)
        return RankedHit(hit.id, hit.score, hit.source, self._round.get(hit.id),
                         tuple(r for r in RETRIEVERS if r in self._by.get(hit.id, ())),
                         None if label is None else float(label))


def label_mass(ids: Iterable[str], labels: Mapping[str, float], depth: int = 10) -> float | None:
    """Σ φ over the first `depth` of a ranking that were labelled; None when none was."""
    scored = [labels[doc] for doc in list(ids)[:depth] if doc in labels]
    return round(float(sum(scored)), 6) if scored else None


@dataclass
class RoundTrace:
    """What one round of any method did: the first-stage family uses this class as it is;
    TOUR rounds (`TourRound`) and agent rounds (`es_tour.agents.AgentRound`) add their own
    fields. `trace_dict` is the one way a trace becomes JSON."""

    round: int
    retrieved: int
    newly_scored: int
    _: KW_ONLY
    ranking: list[str] = field(default_factory=list)  # returned if the search stopped here
    new_docs: int = 0  # docs no earlier round had retrieved
    label_mass_at_10: float | None = None  # Σ φ over the ranking's labelled top 10
    timings: Timings = field(default_factory=Timings)

    def to_dict(self) -> dict[str, Any]:
        return trace_dict(self)


@dataclass(kw_only=True)
class TourRound(RoundTrace):
    """A TOUR or Rocchio round: what it labelled and how far the query moved."""

    top_ids: list[str] = field(default_factory=list)  # the round's top-k that carry labels
    labelled: list[str] = field(default_factory=list)  # docs sent to the labeler this round
    delta_q_norm: float | None = None  # ‖q_{t+1} − q_t‖; None when the round stopped
    pseudo_positives: list[str] | None = None
    loss_docs: int | None = None  # docs the update was computed over


def trace_dict(trace: RoundTrace) -> dict[str, Any]:
    """A round as the JSON of `ext.tour.rounds` and the bench's traces: every field, the
    timings flattened in, unset optional facts left out."""
    out: dict[str, Any] = {}
    for f in fields(trace):
        value = getattr(trace, f.name)
        if f.name == "timings":
            out.update(value.to_dict())
        elif value is not None:
            out[f.name] = value
    return out


@dataclass
class SearchResult:
    """The final ranking of one query by one method, with its trace and costs."""

    method: str
    hits: list[RankedHit]
    rounds: list[RoundTrace]
    pairs_scored: int
    engine_calls: int
    timings: Timings
    parameters: dict[str, Any] = field(default_factory=dict)
    degraded: bool = False
    # BM25 of the query as written, of the docs whose score the method's own calls gave:
    # final-score fusion asks the engine only for the others'
    lexical_scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "parameters": self.parameters,
            "pairs_scored": self.pairs_scored,
            "engine_calls": self.engine_calls,
            "degraded": self.degraded,
            "timings": self.timings.to_dict(),
            "rounds": [r.to_dict() for r in self.rounds],
        }


class SearchMethod(Protocol):
    @property
    def name(self) -> str: ...

    async def search(self, query: str, size: int = 10) -> SearchResult: ...


@dataclass(frozen=True)
class MethodOptions:
    """Base of per-method options: unknown keys are rejected with the supported ones."""

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> Any:
        return from_options(cls, options)


@dataclass(frozen=True)
class FusionWeights:
    """The weights of z(BM25) and z(q0·c) beside z(φ); both 0 is φ alone."""

    w_bm25: float = 0.0
    w_dense: float = 0.0

    def __post_init__(self) -> None:
        check_number("w_bm25", self.w_bm25, 0, 10)
        check_number("w_dense", self.w_dense, 0, 10)

    @property
    def active(self) -> bool:
        return self.w_bm25 > 0 or self.w_dense > 0
