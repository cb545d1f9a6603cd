"""Choose an index's method and fusion weights on its own judged queries: the budget
frontier's search (`make bench-frontier`), for any BEIR collection (`es-tour tune`).

At each labeler budget every candidate runs once per fitting query. Its labelled pool gets
BM25 and kNN scores (`pool_scores`), and the fusion weights (w_bm25, w_dense) with the best
nDCG@10 on a grid are kept. The candidate whose fused nDCG@10 is best is the choice, which
is then checked against rerank-hybrid at the same budget on queries the fit never saw.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.evaluation import RUN_DEPTH, MethodSpec
from es_tour.metrics import ranked, score_run
from es_tour.pipeline import BUDGET_OPTIONS, SearchContext, Timings, build_method
from es_tour.pipeline._fusion import pool_scores
from es_tour.tour import fused_scores

GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
CONCURRENCY = 4  # searches in flight at once, in the fit and in the held-out check
BASELINE = "rerank-hybrid"  # reranking BM25 ∪ kNN: what a choice must beat
# `name` or `name:key=value`, as `es-tour eval` takes them; `plain_spec` adds the budget
CANDIDATES = ("rerank", BASELINE, "rerank:first_stage=hybrid-linear", "tour-hard",
              "hybrid-tour", "hybrid-tour:pool=hybrid-linear:lexical=none", "hre",
              "rm3-agent")
ROUNDS_PER_BUDGET = 2  # the refining methods label budget/2 new docs a round, at most 10
# with one judged split, this share of its queries (drawn with this seed) is held out
HELD_OUT_SHARE = 0.3
HELD_OUT_SEED = 0


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
    """One query's result: its labelled docs with φ, BM25 and kNN scores, then the rest."""

    ids: list[str]
    phi: np.ndarray
    bm25: np.ndarray
    dense: np.ndarray
    rest: list[str]

    def ranking(self, w_bm25: float, w_dense: float) -> list[str]:
        scores = fused_scores(self.phi, self.bm25, self.dense, w_bm25, w_dense)
        return [self.ids[i] for i in np.argsort(-scores, kind="stable")] + self.rest


async def pools(context: SearchContext, spec: MethodSpec, queries: Mapping[str, str],
                on_query: Callable[[str], None] | None = None) -> dict[str, Pool]:
    """Each query's `Pool` under `spec`, `CONCURRENCY` searches at a time."""
    method = build_method(spec.name, context, spec.options)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> Pool:
        async with gate:
            result = await method.search(text, RUN_DEPTH)
            labelled = [hit for hit in result.hits if hit.label is not None]
            ids = [hit.id for hit in labelled]
            bm25, dense = await pool_scores(context, text, ids, Timings())
        if on_query:
            on_query(spec.label)
        return Pool(ids, np.array([hit.label for hit in labelled]), bm25, dense,
                    [hit.id for hit in result.hits if hit.label is None])

    found = await asyncio.gather(*(one(text) for text in queries.values()))
    return dict(zip(queries, found, strict=True))


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


@dataclass(frozen=True)
class Fitted:
    """A candidate at a budget, with the fusion weights fitted for it and their nDCG@10
    on the fitting queries."""

    spec: MethodSpec
    w_bm25: float
    w_dense: float
    fit_ndcg: float

    @property
    def fused(self) -> MethodSpec:
        return fused_spec(self.spec, self.w_bm25, self.w_dense)


async def fit_candidates(context: SearchContext, queries: Mapping[str, str],
                         qrels: Mapping[str, Mapping[str, int]], budget: int,
                         candidates: Sequence[str] = CANDIDATES,
                         on_query: Callable[[str], None] | None = None) -> list[Fitted]:
    """Every candidate at `budget`, its weights fitted on `queries`."""
    fitted = []
    for candidate in candidates:
        spec = plain_spec(candidate, budget)
        fitted.append(Fitted(spec, *fit(await pools(context, spec, queries, on_query), qrels)))
    return fitted


def choose(fitted: Sequence[Fitted]) -> Fitted:
    """The best fitted nDCG@10; the earlier candidate on a tie."""
    return max(fitted, key=lambda each: (each.fit_ndcg, -fitted.index(each)))


@dataclass(frozen=True)
class Splits:
    """Where the fit and the check take their queries: two judged splits, or one split's
    queries divided (`fit_ids`, `held_out_ids`)."""

    fit: str
    held_out: str
    fit_ids: frozenset[str] | None = None
    held_out_ids: frozenset[str] | None = None

    def describe(self) -> str:
        if self.fit_ids is None or self.held_out_ids is None:
            return f"fitted on {self.fit}, checked on {self.held_out}"
        return (f"fitted on {len(self.fit_ids)} {self.fit} queries, checked on the other "
                f"{len(self.held_out_ids)} (held out with seed {HELD_OUT_SEED})")

    def queries(self, dataset: BeirDataset, held_out: bool) -> dict[str, str]:
        split, ids = ((self.held_out, self.held_out_ids) if held_out
                      else (self.fit, self.fit_ids))
        return {qid: text for qid, text in dataset.queries(split).items()
                if ids is None or qid in ids}


def splits(dataset: BeirDataset) -> Splits:
    """train for the fit and test (else dev) for the check; with one judged split, a
    fixed-seed `HELD_OUT_SHARE` of its queries is held out."""
    available = sorted(path.stem for path in (dataset.root / "qrels").glob("*.tsv"))
    held_out = next((name for name in ("test", "dev") if name in available), None)
    if "train" in available and held_out:
        return Splits("train", held_out)
    if len(available) != 1:
        raise ConfigError(f"tune needs a train split and a test or dev split, or one judged "
                          f"split to divide; qrels/ has {available}")
    only = available[0]
    ids = sorted(dataset.queries(only))
    random.Random(HELD_OUT_SEED).shuffle(ids)
    cut = round(len(ids) * HELD_OUT_SHARE)
    if cut < 1 or cut == len(ids):
        raise ConfigError(f"split [{only}] has {len(ids)} judged queries: too few to hold "
                          "some out")
    return Splits(only, only, frozenset(ids[cut:]), frozenset(ids[:cut]))
