"""Choose an index's method and fusion weights on its own judged queries: the budget
frontier's search (`make bench-frontier`), for any BEIR collection (`es-tour tune`).

At each labeler budget every candidate runs once per fitting query. Its labelled pool gets
BM25 and kNN scores (`pool_scores`), and the fusion weights (w_bm25, w_dense) with the best
nDCG@10 on a grid are kept. The candidate whose fused nDCG@10 is best is the choice. A
guard then checks it against rerank-hybrid at the same budget on validation queries the fit
never saw, and keeps rerank-hybrid where the choice trails; held-out queries that neither
step read only report the outcome (`Splits`).

A labelling method must also pay for its labeler: beside it run the labeler-free candidates,
plain BM25 (the application's own query) and hybrid-linear (its `lexical_weight` fitted on
the same fitting queries). `decide` keeps a refining method only where it beats the best of
them on the validation queries by `MIN_GAIN` nDCG@10 and wins at least as many of those
queries as it loses; else the best labeler-free candidate, and with plain BM25 that means
leaving TOUR off.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.evaluation import RUN_DEPTH, MethodSpec
from es_tour.metrics import Robustness, ranked, robustness, score_run
from es_tour.models import EnsembleLabeler, Member, ensemble_name, parse_ensemble
from es_tour.pipeline import (
    BUDGET_OPTIONS,
    RankedHit,
    SearchContext,
    Timings,
    build_method,
    linear_scores,
)
from es_tour.pipeline._fusion import pool_scores
from es_tour.tour import fused_scores, hybrid_scores

GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
# an ensemble's member weights, each beside the first member's 1.0
MEMBER_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
# the method whose labelled pools fit the member weights: one round, so which docs it labels
# does not depend on the weights being fitted
MEMBER_FIT_METHOD = "rerank:first_stage=hybrid-linear"
CONCURRENCY = 4  # searches in flight at once, in the fit and in the held-out check
BASELINE = "rerank-hybrid"  # reranking BM25 ∪ kNN: what a choice must beat
# `name` or `name:key=value`, as `es-tour eval` takes them; `plain_spec` adds the budget
CANDIDATES = ("rerank", BASELINE, "rerank:first_stage=hybrid-linear", "tour-hard",
              "hybrid-tour", "hybrid-tour:pool=hybrid-linear:lexical=none", "hre",
              "rm3-agent", "relevance-feedback")
ROUNDS_PER_BUDGET = 2  # the refining methods label budget/2 new docs a round, at most 10
# with one judged split, this share of its queries (drawn with this seed) is held out for
# the report only
HELD_OUT_SHARE = 0.3
HELD_OUT_SEED = 0
# this share of the fitting split's queries (drawn with this seed) is left out of the fit:
# the guard decides on them whether the choice beats the baseline
VALIDATION_SHARE = 0.3
VALIDATION_SEED = 0
# the labeler-free candidates a labelling method must beat: the application's own query as
# the engine orders it, and hybrid-linear with its lexical weight fitted on this grid
PLAIN_BM25 = "bm25"
LINEAR = "hybrid-linear"
LEXICAL_GRID = tuple(step / 10 for step in range(11))
# a refining method is kept where it beats the best labeler-free candidate by this much
# nDCG@10 on the validation queries: about one standard error of that mean difference on
# SciFact's 243 (0.011 to 0.014, per-query differences spreading 0.16 to 0.22, in tune's
# run at 20 pairs), and the budget frontier's +0.01 target for a labelling method
MIN_GAIN = 0.01
MIN_ROBUSTNESS = 0.0  # ... and (wins - losses) / queries at least this: no more losses
# judged fitting queries from which tune trains a labeler of its own (`es-tour
# train-labeler`, cross-fitted) as a candidate beside the one given: on SciFact a tower
# tuned on 50 cost the held-out queries 0.004 nDCG@10; from 100 on, tune gained with it or
# kept the one given (docs/deployment.md, "A labeler of the index's own")
MIN_TUNING_QUERIES = 100


def plain_spec(method: str, budget: int) -> MethodSpec:
    """`method` capped at `budget` pairs; TOUR and hybrid-tour label budget/2 a round
    (≤ 10), so even budget 10 has a round after round 0."""
    given = MethodSpec.parse(method)
    name = given.name
    options: dict[str, Any] = {BUDGET_OPTIONS[name]: budget}
    if name in ("tour-hard", "hybrid-tour"):
        options["k"] = min(10, budget // ROUNDS_PER_BUDGET)
    options |= given.options
    label = ":".join([name, *(f"{key}={value}" for key, value in options.items())])
    return MethodSpec(label, name, options, budget)


def fused_spec(spec: MethodSpec, w_bm25: float, w_dense: float) -> MethodSpec:
    options = {**spec.options, "w_bm25": w_bm25, "w_dense": w_dense}
    return MethodSpec(f"{spec.label}:w_bm25={w_bm25}:w_dense={w_dense}", spec.name, options,
                      spec.budget)


@dataclass(frozen=True)
class Pool:
    """One query's result: its labelled docs with φ, BM25 and kNN scores, then the rest;
    with an ensemble labeler, `members` holds each member's standardised score (n, m)."""

    ids: list[str]
    phi: np.ndarray
    bm25: np.ndarray
    dense: np.ndarray
    rest: list[str]
    members: np.ndarray | None = None

    def ranking(self, w_bm25: float, w_dense: float,
                member_weights: Sequence[float] | None = None) -> list[str]:
        """The labelled docs by fused score, φ taken as the members' weighted sum when
        `member_weights` are given; then the rest in the method's order."""
        phi = self.phi
        if member_weights is not None and self.members is not None:
            phi = self.members @ np.asarray(member_weights, dtype=np.float32)
        scores = fused_scores(phi, self.bm25, self.dense, w_bm25, w_dense)
        return [self.ids[i] for i in np.argsort(-scores, kind="stable")] + self.rest


Found = TypeVar("Found")


async def each_query(queries: Mapping[str, str], search: Callable[[str], Awaitable[Found]],
                     label: str, on_query: Callable[[str], None] | None = None
                     ) -> dict[str, Found]:
    """`search` of each query's text, `CONCURRENCY` at a time, by query id; `on_query`
    hears `label` as each is done."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> Found:
        async with gate:
            found = await search(text)
        if on_query:
            on_query(label)
        return found

    found = await asyncio.gather(*(one(text) for text in queries.values()))
    return dict(zip(queries, found, strict=True))


async def pools(context: SearchContext, spec: MethodSpec, queries: Mapping[str, str],
                on_query: Callable[[str], None] | None = None) -> dict[str, Pool]:
    """Each query's `Pool` under `spec`, `CONCURRENCY` searches at a time."""
    method = build_method(spec.name, context, spec.options)

    async def one(text: str) -> Pool:
        result = await method.search(text, RUN_DEPTH)
        labelled = [hit for hit in result.hits if hit.label is not None]
        ids = [hit.id for hit in labelled]
        bm25, dense, _ = await pool_scores(context, text, ids, Timings())
        return Pool(ids, np.array([hit.label for hit in labelled]), bm25, dense,
                    [hit.id for hit in result.hits if hit.label is None],
                    member_scores(context, text, labelled))

    return await each_query(queries, one, spec.label, on_query)


def member_scores(context: SearchContext, query: str, hits: Sequence[RankedHit]
                  ) -> np.ndarray | None:
    """(n, m): each member's score of the hits over its spread, for an ensemble labeler
    (each member has them cached since it labelled them); None for one model."""
    labeler = context.labeler
    if not isinstance(labeler, EnsembleLabeler) or not hits:
        return None
    scale = labeler.weights / np.asarray(labeler.member_weights, dtype=np.float32)
    docs = [(hit.id, context.doc_text(hit.source)) for hit in hits]
    scores = [member.score(query, docs, context.index) for member in labeler.members]
    return np.stack(scores, axis=1) * scale


def fit(found: Mapping[str, Pool], qrels: Mapping[str, Mapping[str, int]]
        ) -> tuple[float, float, float]:
    """The grid's (w_bm25, w_dense) with the best mean nDCG@10, and that nDCG."""
    best = (0.0, 0.0, -1.0)
    for w_bm25, w_dense in itertools.product(GRID, GRID):
        run = {qid: ranked(pool.ranking(w_bm25, w_dense)) for qid, pool in found.items()}
        ndcg = score_run(qrels, run)["ndcg@10"]
        if ndcg > best[2] + 1e-9:
            best = (w_bm25, w_dense, ndcg)
    return best


def fit_members(found: Mapping[str, Pool], qrels: Mapping[str, Mapping[str, int]]
                ) -> tuple[tuple[float, ...], float]:
    """An ensemble's member weights (the first member's 1.0, the others' on
    `MEMBER_GRID`) with the best mean nDCG@10 of the pools reranked by φ alone, and that
    nDCG. Fusion weights are fitted afterwards, per method, with the weights chosen."""
    members = next(iter(found.values())).members
    if members is None:
        raise ConfigError("fit_members needs pools labelled by an ensemble")
    best: tuple[tuple[float, ...], float] = ((), -1.0)
    for rest in itertools.product(MEMBER_GRID, repeat=members.shape[1] - 1):
        weights = (1.0, *rest)
        run = {qid: ranked(pool.ranking(0.0, 0.0, weights)) for qid, pool in found.items()}
        ndcg = score_run(qrels, run)["ndcg@10"]
        if ndcg > best[1] + 1e-9:
            best = (weights, ndcg)
    return best


def weighted_labeler(labeler: str, weights: Sequence[float]) -> str:
    """The ensemble `labeler` named with `weights`, one per member, as fitted; a member
    fitted to 0 is left out, and a lone member is named alone."""
    kept = [Member(member.model, weight) for member, weight
            in zip(parse_ensemble(labeler), weights, strict=True) if weight > 0]
    return kept[0].model if len(kept) == 1 else ensemble_name(kept)


@dataclass(frozen=True)
class Fitted:
    """A candidate at a budget, with the fusion weights fitted for it and their nDCG@10
    on the fitting queries, and the labeler it ran with."""

    spec: MethodSpec
    w_bm25: float
    w_dense: float
    fit_ndcg: float
    labeler: str = "default"

    @property
    def fused(self) -> MethodSpec:
        return fused_spec(self.spec, self.w_bm25, self.w_dense)


async def fit_candidates(parts: Sequence[tuple[SearchContext, Mapping[str, str]]],
                         qrels: Mapping[str, Mapping[str, int]], budget: int,
                         candidates: Sequence[str] = CANDIDATES,
                         on_query: Callable[[str], None] | None = None,
                         labeler: str = "default") -> list[Fitted]:
    """Every candidate at `budget`, its weights fitted on the queries of `parts`, each part's
    labelled by its context's labeler (one part; or, for a labeler tuned on these queries,
    each fold's by the tower that never trained on them), which `labeler` names."""
    fitted = []
    for candidate in candidates:
        spec = plain_spec(candidate, budget)
        found: dict[str, Pool] = {}
        for context, queries in parts:
            found |= await pools(context, spec, queries, on_query)
        fitted.append(Fitted(spec, *fit(found, qrels), labeler=labeler))
    return fitted


def choose(fitted: Sequence[Fitted]) -> Fitted:
    """The best fitted nDCG@10; the earlier candidate on a tie."""
    return max(fitted, key=lambda each: (each.fit_ndcg, -fitted.index(each)))


@dataclass(frozen=True)
class LinearPool:
    """One query's hybrid-linear union with each doc's BM25 and kNN score."""

    ids: list[str]
    bm25: np.ndarray
    dense: np.ndarray

    def ranking(self, lexical_weight: float) -> list[str]:
        scores = hybrid_scores(self.bm25, self.dense, lexical_weight)
        return [self.ids[i] for i in np.argsort(-scores, kind="stable")]


async def linear_pools(context: SearchContext, queries: Mapping[str, str],
                       on_query: Callable[[str], None] | None = None
                       ) -> dict[str, LinearPool]:
    """Each query's `LinearPool`, `CONCURRENCY` at a time: one search each, whatever the
    weight it is then ranked with."""

    async def one(text: str) -> LinearPool:
        return LinearPool(*await linear_scores(context, text, Timings()))

    return await each_query(queries, one, LINEAR, on_query)


def fit_lexical_weight(found: Mapping[str, LinearPool],
                       qrels: Mapping[str, Mapping[str, int]]) -> tuple[float, float]:
    """hybrid-linear's `lexical_weight` on `LEXICAL_GRID` with the best mean nDCG@10, and that
    nDCG, as `fit` fits the fusion weights: the earlier weight on a tie."""
    best = (0.0, -1.0)
    for weight in LEXICAL_GRID:
        run = {qid: ranked(pool.ranking(weight)) for qid, pool in found.items()}
        ndcg = score_run(qrels, run)["ndcg@10"]
        if ndcg > best[1] + 1e-9:
            best = (weight, ndcg)
    return best


def labeler_free(lexical_weight: float) -> list[MethodSpec]:
    """The candidates that label nothing: plain BM25, then hybrid-linear at `lexical_weight`."""
    return [MethodSpec.parse(PLAIN_BM25),
            MethodSpec(f"{LINEAR}:lexical_weight={lexical_weight}", LINEAR,
                       {"lexical_weight": lexical_weight})]


@dataclass(frozen=True)
class Cost:
    """What a search costs over the application's plain search, as the load benchmark
    measured it: the engine's CPU and the median latency, each a ratio."""

    engine_cpu: float
    p50: float


@dataclass(frozen=True)
class Measured:
    """A candidate's nDCG@10 on each validation query, whether it labels docs, and its cost
    (None: not measured)."""

    label: str
    ndcg: Mapping[str, float]
    refining: bool
    cost: Cost | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.ndcg.values())))


@dataclass(frozen=True)
class Standing:
    """A candidate beside the best labeler-free one, on the validation queries."""

    candidate: Measured
    gain: float  # mean nDCG@10 over the best labeler-free candidate's
    versus: Robustness  # query by query against it

    @property
    def wins(self) -> int:
        return self.versus.wins

    @property
    def losses(self) -> int:
        return self.versus.losses

    def pays(self, min_gain: float, min_robustness: float) -> bool:
        return (self.candidate.refining and self.gain >= min_gain - 1e-9
                and self.versus.index >= min_robustness - 1e-9)


@dataclass(frozen=True)
class Decision:
    """The candidate kept (`off`: plain BM25, so TOUR stays off), why in one sentence, and
    every candidate's standing against `against`, the best labeler-free one."""

    kept: str
    off: bool
    reason: str
    against: str
    standings: list[Standing]


def decide(candidates: Sequence[Measured], min_gain: float = MIN_GAIN,
           min_robustness: float = MIN_ROBUSTNESS) -> Decision:
    """Keep the best refining candidate that pays: it beats the best labeler-free one by
    `min_gain` mean nDCG@10 and its (wins − losses) / queries is at least `min_robustness`;
    where none does, the best labeler-free candidate (the earlier on a tie), which is
    leaving TOUR off when it is plain BM25."""
    free = [each for each in candidates if not each.refining]
    if not free or len(free) == len(candidates):
        raise ConfigError("decide needs labeler-free and refining candidates")
    best_free = max(free, key=lambda each: (each.mean, -free.index(each)))
    standings = [Standing(each, each.mean - best_free.mean,
                          robustness(each.ndcg, best_free.ndcg)) for each in candidates]
    refining = [each for each in standings if each.candidate.refining]
    paying = [each for each in refining if each.pays(min_gain, min_robustness)]
    queries = len(best_free.ndcg)
    rule = (f"by at least {min_gain} nDCG@10 on the {queries} validation queries "
            f"with (wins − losses) / queries ≥ {min_robustness}")
    if paying:
        kept = max(paying, key=lambda each: (each.candidate.mean, -paying.index(each)))
        return Decision(kept.candidate.label, False, (
            f"{kept.candidate.label} beats {best_free.label}, the best labeler-free "
            f"candidate, {rule} ({kept.gain:+.4f}, {kept.wins} wins, {kept.losses} losses), "
            f"so it is worth its labelling (cost: {cost_text(kept.candidate.cost)})."),
            best_free.label,
            standings)
    best = max(refining, key=lambda each: (each.candidate.mean, -refining.index(each)))
    off = best_free.label == PLAIN_BM25
    outcome = ("TOUR stays off: plain BM25, the application's own search, is the best "
               "candidate" if off else f"tune recommends {best_free.label}, which needs no "
               "labeler")
    return Decision(best_free.label, off, (
        f"No refining candidate beats {best_free.label} {rule} (the best, "
        f"{best.candidate.label}: {best.gain:+.4f}, {best.wins} wins, {best.losses} losses), "
        f"so {outcome}."), best_free.label, standings)


def cost_text(cost: Cost | None) -> str:
    """`engine CPU 30.4×, p50 26.4× a plain search`, or `not measured`."""
    if cost is None:
        return "not measured"
    return f"engine CPU {cost.engine_cpu:.1f}×, p50 {cost.p50:.1f}× a plain search"


Part = Literal["fit", "validation", "report"]


@dataclass(frozen=True)
class Splits:
    """Where each step takes its queries: the fit (`fit_ids`) and the guard's check against
    the baseline (`validation_ids`) divide the judged queries of split `fit`; the report
    (`report_ids`) reads split `report`, all of it, or, when that is the same one judged
    split, the queries neither of the others has. No decision reads a report query."""

    fit: str
    report: str
    fit_ids: frozenset[str]
    validation_ids: frozenset[str]
    report_ids: frozenset[str]

    def describe(self) -> str:
        steps = (f"fitted on {len(self.fit_ids)} {self.fit} queries, the guard against "
                 f"{BASELINE} and the labeler-free candidates decided on "
                 f"{len(self.validation_ids)} other {self.fit} queries (seed {VALIDATION_SEED})")
        if self.report != self.fit:
            return (f"{steps}, reported on the {len(self.report_ids)} {self.report} queries, "
                    "which no decision reads")
        return (f"{steps}, reported on the other {len(self.report_ids)} (held out with seed "
                f"{HELD_OUT_SEED}), which no decision reads")

    def queries(self, dataset: BeirDataset, part: Part) -> dict[str, str]:
        """The part's queries, in the split's order."""
        split, ids = {"fit": (self.fit, self.fit_ids),
                      "validation": (self.fit, self.validation_ids),
                      "report": (self.report, self.report_ids)}[part]
        return {qid: text for qid, text in dataset.queries(split).items() if qid in ids}


def splits(dataset: BeirDataset) -> Splits:
    """train for the fit and the guard, a fixed-seed `VALIDATION_SHARE` of its queries the
    guard's, and test (else dev) for the report; with one judged split, a fixed-seed
    `HELD_OUT_SHARE` of its queries is the report's and the rest is divided as train is."""
    available = sorted(path.stem for path in (dataset.root / "qrels").glob("*.tsv"))
    report = next((name for name in ("test", "dev") if name in available), None)
    if "train" in available and report:
        fitting, validation = _hold_out("train", dataset.queries("train"), VALIDATION_SHARE,
                                        VALIDATION_SEED, "the guard")
        return Splits("train", report, fitting, validation, frozenset(dataset.queries(report)))
    if len(available) != 1:
        raise ConfigError(f"tune needs a train split and a test or dev split, or one judged "
                          f"split to divide; qrels/ has {available}")
    only = available[0]
    rest, reported = _hold_out(only, dataset.queries(only), HELD_OUT_SHARE, HELD_OUT_SEED,
                               "the report")
    fitting, validation = _hold_out(only, rest, VALIDATION_SHARE, VALIDATION_SEED,
                                    "the guard")
    return Splits(only, only, fitting, validation, reported)


def _hold_out(split: str, ids: Iterable[str], share: float, seed: int, step: str
              ) -> tuple[frozenset[str], frozenset[str]]:
    """(kept, held out): a `share` of `ids`, drawn with `seed`, held out for `step`."""
    shuffled = sorted(ids)
    random.Random(seed).shuffle(shuffled)
    cut = round(len(shuffled) * share)
    if cut < 1 or cut == len(shuffled):
        raise ConfigError(f"split [{split}]: {len(shuffled)} judged queries are too few to "
                          f"hold some out for {step}")
    return frozenset(shuffled[cut:]), frozenset(shuffled[:cut])
