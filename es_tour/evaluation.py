"""Run named methods over a BEIR split and score them with ir-measures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import es_tour.agents  # noqa: F401  (registers the agent methods)
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.metrics import Qrels, Robustness, ndcg_at_k, ranked, robustness, score_run
from es_tour.pipeline import (
    BUDGET_OPTIONS,
    SearchContext,
    SearchMethod,
    SearchResult,
    build_method,
)

RUN_DEPTH = 100  # Recall@100 needs 100 results per query
# Corpus vectors encode every doc once in large batches (and are cached for later runs);
# live labelling by a dual encoder embeds each distinct labelled doc once, a query's handful
# at a time, which costs more per doc. Pairs bound those docs from above (queries share few
# docs in a large corpus), so the vectors pay once a run labels half as many pairs as the
# corpus has docs.
CORPUS_VECTORS_BREAK_EVEN = 0.5
# A labelling method given no budget labels at least its first window (k=10 for TOUR and
# the agents); counting only that keeps a run off the corpus on a guess.
LEAST_PAIRS_PER_QUERY = 10
ETA_AFTER = 10  # searches done before the one-line ETA: the rate of fewer is noise


@dataclass(frozen=True)
class MethodSpec:
    """`name` or `name:key=value:key=value`, e.g. `tour-hard:k=10:max_rounds=3`."""

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    budget: int | None = None  # labeler pairs per query, when set by `with_budgets`

    @classmethod
    def parse(cls, text: str) -> MethodSpec:
        name, *pairs = text.strip().split(":")
        options: dict[str, Any] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ConfigError(f"bad method option [{pair}] in [{text}]; expected key=value")
            if key in options:
                raise ConfigError(f"method option [{key}] given twice in [{text}]")
            options[key] = _parse_value(value)
        return cls(text.strip(), name, options)


def _parse_value(value: str) -> Any:
    if value in ("true", "false"):  # switches such as tour's explore=true
        return value == "true"
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return value


def parse_methods(text: str) -> list[MethodSpec]:
    return [MethodSpec.parse(part) for part in text.split(",") if part.strip()]


def with_budgets(specs: Sequence[MethodSpec], budgets: Sequence[int]) -> list[MethodSpec]:
    """Each labelling method once per budget, its budget option set (replacing any given);
    methods without a budget option run once, as given."""
    out: list[MethodSpec] = []
    for spec in specs:
        option = BUDGET_OPTIONS.get(spec.name)
        if option is None:
            out.append(spec)
            continue
        for budget in budgets:
            options = {**spec.options, option: budget}
            label = ":".join([spec.name, *(f"{key}={value}" for key, value in options.items())])
            out.append(MethodSpec(label, spec.name, options, budget))
    return out


def parse_budgets(text: str) -> list[int]:
    """`10,20,40` -> [10, 20, 40]: positive pair counts."""
    try:
        budgets = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"budgets must be whole numbers separated by commas, got [{text}]"
                          ) from None
    if not budgets or min(budgets) < 1:
        raise ConfigError(f"budgets must be at least 1 pair per query, got [{text}]")
    return budgets


def expected_pairs(methods: Sequence[MethodSpec], queries: int, cold_labels: bool) -> int:
    """About how many (query, doc) pairs a run labels: each labelling method's budget (its
    budget option, else `LEAST_PAIRS_PER_QUERY`) per query; with labels shared across
    methods a pair is labelled once, so the largest budget counts, else their sum."""
    per_query = [_pairs_per_query(spec) for spec in methods if spec.name in BUDGET_OPTIONS]
    if not per_query:
        return 0
    return queries * (sum(per_query) if cold_labels else max(per_query))


def _pairs_per_query(spec: MethodSpec) -> int:
    if spec.budget is not None:
        return spec.budget
    given = spec.options.get(BUDGET_OPTIONS[spec.name])
    return given if isinstance(given, int) and given > 0 else LEAST_PAIRS_PER_QUERY


def corpus_vectors_pay(pairs: int, corpus_docs: int, cached: bool) -> bool:
    """Whether a dual-encoder labeler should label by corpus vectors: always once they are
    cached (loading costs nothing), else when the run labels enough pairs to outweigh
    encoding the whole corpus. φ is the same either way."""
    return pairs > 0 and (cached or pairs >= CORPUS_VECTORS_BREAK_EVEN * corpus_docs)


@dataclass
class MethodReport:
    spec: MethodSpec
    metrics: dict[str, float]
    latencies_ms: list[float]
    pairs_scored: list[int]
    results: dict[str, SearchResult]

    def metrics_on(self, qrels: Qrels, query_ids: Collection[str]) -> dict[str, float]:
        """The metrics over `query_ids` alone (a subset of the report's queries)."""
        return score_run({qid: qrels[qid] for qid in query_ids},
                         {qid: ranked([hit.id for hit in self.results[qid].hits])
                          for qid in query_ids})

    def ndcg_by_query(self, qrels: Qrels) -> dict[str, float]:
        """Each query's nDCG@10, in the report's query order."""
        return {qid: ndcg_at_k([hit.id for hit in result.hits], qrels.get(qid, {}))
                for qid, result in self.results.items()}

    def summary(self) -> dict[str, float]:
        return {
            **{name: round(value, 4) for name, value in self.metrics.items()},
            "latency_ms_p50": round(float(np.percentile(self.latencies_ms, 50)), 2),
            "latency_ms_p95": round(float(np.percentile(self.latencies_ms, 95)), 2),
            "pairs_scored_mean": round(float(np.mean(self.pairs_scored)), 2),
        }


def build_methods(context: SearchContext, methods: Sequence[MethodSpec],
                  qrels: Mapping[str, Mapping[str, int]], queries: Mapping[str, str]
                  ) -> list[tuple[MethodSpec, SearchMethod]]:
    """Each method built, its options checked (no engine call is made); the oracle gets the
    judgements `qrels` of `queries`."""
    judged = {"qrels": qrels, "queries": dict(queries)}
    return [(spec, build_method(spec.name, context,
                                {**spec.options, **(judged if spec.name == "oracle-agent"
                                                    else {})}))
            for spec in methods]


async def evaluate(
    context: SearchContext,
    dataset: BeirDataset,
    methods: Sequence[MethodSpec],
    *,
    split: str = "test",
    max_queries: int | None = None,
    on_query: Callable[[str], None] | None = None,
    cold_labels: bool = True,
    query_ids: Collection[str] | None = None,
    concurrency: int = 1,
) -> list[MethodReport]:
    """Each method over the split's queries, one at a time so latencies are honest.

    `query_ids` keeps only those queries, `max_queries` the first N of what is kept.
    With `cold_labels` every method starts with an empty labeler cache, so none is timed
    on labels another paid for; without, the methods also share each query's embedding,
    and `concurrency` queries may run at once (a quality run: each latency then includes
    waiting on the others). Pairs scored are counted per search either way.
    """
    if concurrency != 1 and (cold_labels or concurrency < 1):
        raise ConfigError(f"concurrency [{concurrency}] must be 1 with cold labels (timed "
                          "searches run one at a time), else >= 1")
    qrels = dataset.qrels(split)
    queries = [(qid, text) for qid, text in dataset.queries(split).items()
               if query_ids is None or qid in query_ids][:max_queries]
    if not cold_labels:  # latency is not measured: methods share each query's vector too
        if context.query_vectors is None:
            context = replace(context, query_vectors={})
        context.embed_ahead([text for _, text in queries])
    built = build_methods(context, methods, qrels, dict(queries))
    reports = []
    for spec, method in built:
        if cold_labels:
            _forget_labels(context)
        answered = await _search_each(method, [text for _, text in queries], concurrency,
                                      on_query, spec.label)
        results = {qid: result for (qid, _), (result, _) in zip(queries, answered, strict=True)}
        run = {qid: ranked([hit.id for hit in result.hits]) for qid, result in results.items()}
        reports.append(MethodReport(spec, score_run(qrels, run),
                                    [elapsed for _, elapsed in answered],
                                    [result.pairs_scored for result in results.values()],
                                    results))
    return reports


async def _search_each(method: SearchMethod, texts: Sequence[str], concurrency: int,
                       on_query: Callable[[str], None] | None, label: str
                       ) -> list[tuple[SearchResult, float]]:
    """(result, ms) of each text's search, in order, `concurrency` at a time; `on_query`
    hears `label` after each."""
    gate = asyncio.Semaphore(concurrency)

    async def timed(text: str) -> tuple[SearchResult, float]:
        async with gate:
            started = time.perf_counter()
            result = await method.search(text, RUN_DEPTH)
            elapsed_ms = (time.perf_counter() - started) * 1000
        if on_query:
            on_query(label)
        return result, elapsed_ms

    async with asyncio.TaskGroup() as group:  # a failed search cancels the rest
        tasks = [group.create_task(timed(text)) for text in texts]
    return [task.result() for task in tasks]


@contextmanager
def progress_bar(description: str, total: int, console: Console | None = None,
                 unit: str = "searches") -> Iterator[Callable[[str], None]]:
    """A bar with elapsed time and time remaining over `total` searches (or other `unit`s),
    and one printed line with the ETA once the first `ETA_AFTER` are done (a log or a pipe
    shows no bar); yields the `on_query` callback `evaluate` takes."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), transient=True,
                  console=console) as progress:
        task = progress.add_task(description, total=total)
        started = time.perf_counter()
        done = 0

        def advance(label: str) -> None:
            nonlocal done
            done += 1
            progress.update(task, advance=1, description=f"{description} {label}")
            if done == min(ETA_AFTER, total) and done < total:
                progress.console.print(eta_line(done, total, time.perf_counter() - started,
                                                unit))

        yield advance


def eta_line(done: int, total: int, elapsed_s: float, unit: str = "searches") -> str:
    """`done` of `total` searches (`unit`s) took `elapsed_s`: the rest at the same rate."""
    left = elapsed_s / done * (total - done)
    return (f"{done}/{total} {unit} in {_duration(elapsed_s)}: about {_duration(left)} "
            "left at this rate (the bar's estimate follows)")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else (
        f"{minutes} min {secs:02d} s" if minutes else f"{secs} s")


def _forget_labels(context: SearchContext) -> None:
    clear = getattr(context.labeler, "clear_cache", None)
    if clear is not None:
        clear()


def robustness_against(reports: Sequence[MethodReport], qrels: Qrels, reference: str
                       ) -> dict[str, Robustness]:
    """Each method's per-query robustness against the report labelled `reference` (the
    labeler-free hybrid-linear, say); none when no report has that label."""
    base = next((r for r in reports if r.spec.label == reference), None)
    if base is None:
        return {}
    ndcg = base.ndcg_by_query(qrels)
    return {r.spec.label: robustness(r.ndcg_by_query(qrels), ndcg)
            for r in reports if r is not base}


def report_json(
    dataset: BeirDataset, engine: str, split: str, reports: Sequence[MethodReport],
    robust: Mapping[str, Robustness] | None = None, reference: str | None = None,
) -> dict[str, Any]:
    robust = robust or {}
    return {
        "dataset": dataset.name,
        "engine": engine,
        "split": split,
        **({"robustness_against": reference} if robust else {}),
        "methods": {r.spec.label: {**r.summary(), "budget": r.spec.budget,
                                   **({"robustness": robust[r.spec.label].to_dict()}
                                      if r.spec.label in robust else {})}
                    for r in reports},
    }
