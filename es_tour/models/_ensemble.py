"""Ensemble labelers: several models' scores of a (query, doc) pair, each standardised, summed
with weights.

Two encoders that score about as well alone make different mistakes, so together they label
better (docs/RESULTS.md). A labeler name with `+` names an ensemble (unless it is the path of an
existing model directory), each member a registry model or a model directory with an
optional `^weight`, as a boosted query term reads:

    bge-small-en-v1.5^1.0+e5-small-v2^0.5

φ(q, d) = Σ_m w_m · s_m(q, d) · σ_1 / σ_m, where σ_m is the member's spread of scores
within a query (`SPREADS`, measured on SciFact train): each member standardised by its
spread, in the first member's units, so φ spreads like one model's score and a temperature
over it (TOUR's softmax(φ/τ)) means what it means for that model. The spread is fixed per
member rather than measured on each query's labelled docs: a per-query z-score would
depend on which docs a method happened to label first, so one pair would score differently
in two searches and a cached label could not be shared. A per-query offset would not
change any ranking, and final-score fusion z-scores φ per query anyway.

Each member keeps its own caches and counters (and, behind the sidecar, its own vector store),
so a model that is also a labeler on its own shares its doc vectors with the ensemble.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from es_tour.errors import ConfigError
from es_tour.models._labelers import (
    DocKey,
    DualEncoderLabeler,
    Labeler,
    _CachedLabeler,
    load_model_labeler,
)

MEMBER_SEPARATOR = "+"
WEIGHT_MARK = "^"
MAX_MEMBERS = 4
# Each registry labeler's mean within-query standard deviation of φ (cosines at its labeler
# precision) over hybrid-linear's top 20 on the 809 SciFact train queries
# (docs/benchmarks/ensemble.md, `python -m es_tour.bench.ensemble`). A model directory has
# none and is taken as 1.0 (a cross-encoder's logits already spread by units). Per-query
# z-scores rank alike there: bge-small + e5-small, train nDCG@10 0.7580 per query against
# 0.7578 by spread (φ alone), 0.7674 against 0.7676 fused.
SPREADS: dict[str, float] = {"bge-small-en-v1.5": 0.0391, "e5-small-v2": 0.0174,
                             "minilm-l6": 0.0729}


@dataclass(frozen=True)
class Member:
    """One model of an ensemble and its weight."""

    model: str
    weight: float = 1.0

    def __str__(self) -> str:
        return f"{self.model}{WEIGHT_MARK}{self.weight:g}"


def is_ensemble(name: str) -> bool:
    """Whether `name` joins models; a model directory that exists is itself, `+` or not."""
    return ((MEMBER_SEPARATOR in name or WEIGHT_MARK in name)
            and not Path(name).expanduser().exists())


def parse_ensemble(name: str) -> tuple[Member, ...]:
    """`a^w+b^w...` -> its members; a ConfigError says what is wrong with a bad name."""
    members = []
    for part in name.split(MEMBER_SEPARATOR):
        model, mark, weight_text = part.partition(WEIGHT_MARK)
        if not model:
            raise ConfigError(f"labeler [{name}] has an empty member; write models joined by "
                              f"[{MEMBER_SEPARATOR}], each with an optional "
                              f"[{WEIGHT_MARK}weight], e.g. bge-small-en-v1.5+e5-small-v2^0.5")
        try:
            weight = float(weight_text) if mark else 1.0
        except ValueError:
            weight = math.nan
        if not (math.isfinite(weight) and weight > 0):
            raise ConfigError(f"labeler [{name}]: the weight of [{model}] must be a positive "
                              f"number, not [{weight_text}]")
        members.append(Member(model, weight))
    models = [member.model for member in members]
    if len(set(models)) != len(models):
        raise ConfigError(f"labeler [{name}] names a model twice")
    if len(members) > MAX_MEMBERS:
        raise ConfigError(f"labeler [{name}] has {len(members)} members; at most "
                          f"{MAX_MEMBERS}")
    return tuple(members)


def ensemble_name(members: Sequence[Member]) -> str:
    """The canonical name of an ensemble: what `parse_ensemble` reads back."""
    return MEMBER_SEPARATOR.join(map(str, members))


class EnsembleLabeler(_CachedLabeler):
    """φ = Σ_m w_m · s_m · σ_1 / σ_m over member labelers, each scored on its own thread.

    `pairs_scored` counts the ensemble's new pairs; each member counts its own (a member
    that also labels alone, or for another ensemble, has scored some of them already)."""

    def __init__(self, members: Sequence[tuple[Labeler, float]], name: str | None = None,
                 spreads: Callable[[Labeler], float] | None = None) -> None:
        if not members:
            raise ConfigError("an ensemble labeler needs at least one member")
        super().__init__(name or ensemble_name([Member(labeler.name, weight)
                                                for labeler, weight in members]))
        self.members = tuple(labeler for labeler, _ in members)
        self.member_weights = tuple(weight for _, weight in members)  # as named
        spread = spreads or member_spread
        # in the first member's units: its spread over each member's, so φ spreads like one
        # model's score and a temperature over φ (TOUR's softmax(φ/τ)) keeps its meaning
        unit = spread(members[0][0])
        self.weights = np.array([weight * unit / spread(labeler) for labeler, weight in members],
                                dtype=np.float32)
        self._threads = ThreadPoolExecutor(len(members), thread_name_prefix="es-tour-member")

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        index = keys[0][0]
        docs = [(doc_id, text) for (_, doc_id, _), text in zip(keys, texts, strict=True)]
        scores = list(self._threads.map(lambda labeler: labeler.score(query, docs, index),
                                        self.members))
        return np.asarray(self.weights @ np.stack(scores), dtype=np.float32)

    def clear_cache(self) -> None:
        """Forget the ensemble's scores and its members' (a cold start)."""
        super().clear_cache()
        for labeler in self.members:
            if isinstance(labeler, _CachedLabeler):
                labeler.clear_cache()


def member_spread(labeler: Labeler) -> float:
    return SPREADS.get(labeler.name, 1.0)


def vector_labelers(labeler: Labeler) -> list[DualEncoderLabeler]:
    """The dual encoders whose doc vectors `labeler` reuses: itself, or an ensemble's."""
    if isinstance(labeler, EnsembleLabeler):
        return [member for member in labeler.members if isinstance(member, DualEncoderLabeler)]
    return [labeler] if isinstance(labeler, DualEncoderLabeler) else []


def load_labeler(name: str = "default", precision: str | None = None,
                 threads: int | None = None,
                 load_member: Callable[[str], Labeler] | None = None) -> Labeler:
    """The labeler `name` names: one model (`load_model_labeler`), or an ensemble of them
    (`parse_ensemble`), each member loaded by `load_member` when given (the sidecar's
    shared models) at the registry's labeler precision."""
    if not is_ensemble(name):
        return load_model_labeler(name, precision, threads)
    load = load_member or (lambda model: load_model_labeler(model, precision, threads))
    return EnsembleLabeler([(load(member.model), member.weight)
                            for member in parse_ensemble(name)])
