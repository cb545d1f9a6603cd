"""Quality and cost of every method on one engine, the train-split sweep, and ingest speed.

Everything here runs the same `evaluate` as `es-tour eval`; what it adds is the figures a
results table needs beyond the summary: nDCG@10 per round, the agents' Δq operators, and
a cold-labeler latency estimate (below).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from es_tour.agents import AgentRound, TourStep
from es_tour.datasets import BeirDataset
from es_tour.evaluation import (
    MethodReport,
    MethodSpec,
    evaluate,
    progress_bar,
    robustness_against,
)
from es_tour.ingest import ingest
from es_tour.metrics import Robustness, score_run
from es_tour.models import DualEncoder
from es_tour.pipeline import SearchContext
from es_tour.recommended import FRONTIER_LABEL

# every method's robustness is taken against this labeler-free pool, query by query
REFERENCE = "hybrid-linear"
FIRST_STAGE = ("bm25", "knn", "hybrid-rrf", REFERENCE, "vector-rerank")  # no labeler pairs
RERANK = ("rerank:k=10", "rerank:k=40", "rerank:k=100", "rerank:k=100:first_stage=bm25",
          "rerank-hybrid:k=10", "rerank-hybrid:k=40", "rerank-hybrid:k=100")
TOUR = ("rocchio", *(f"tour-{variant}:k={k}:max_rounds={rounds}"
                     for variant in ("hard", "soft") for k in (10, 20) for rounds in (1, 3)))
AGENTS = ("hybrid-tour", FRONTIER_LABEL, "hre", "rm3-agent", "learned-agent", "oracle-agent")
ALL_METHODS = (*FIRST_STAGE, *RERANK, *TOUR, *AGENTS)
USES_JUDGEMENTS = frozenset({"oracle-agent"})
# The papers' comparisons: TOUR-hard at k=10 against rerank at k=40; HARE against HRE.
CROSS_ENCODER_METHODS = (REFERENCE, "rerank:k=10", "rerank:k=40", "rerank:k=100",
                         "tour-hard:k=10:max_rounds=3", "tour-soft:k=10:max_rounds=3",
                         "hre", "learned-agent")


@dataclass(frozen=True)
class LabelerCost:
    """What one newly labelled doc costs the labeler when nothing is cached, measured."""

    name: str
    ms_per_doc: float
    docs_timed: int


def measure_labeler_cost(encoder: DualEncoder, texts: Sequence[str], name: str) -> LabelerCost:
    """Encodes `texts` once, as `DualEncoderLabeler` would encode new docs at query time."""
    encoder.encode_docs(list(texts[:2]))  # onnxruntime's first run allocates
    started = time.perf_counter()
    encoder.encode_docs(list(texts))
    return LabelerCost(name, (time.perf_counter() - started) * 1000 / len(texts), len(texts))


async def run_methods(
    context: SearchContext, dataset: BeirDataset, methods: Sequence[str], split: str,
    max_queries: int | None, labeler_cost: LabelerCost | None = None,
    query_ids: Collection[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """method label -> summary, per-round nDCG@10, operators, cold latency estimate, and
    robustness against REFERENCE where it ran.

    With `labeler_cost`, the labeler read cached doc vectors, so measured latency holds no
    doc encoding; `latency_ms_*_cold` adds each query's new docs × the measured cost.
    """
    specs = [MethodSpec.parse(method) for method in methods]
    queries = len([q for q in dataset.queries(split) if query_ids is None or q in query_ids][
        :max_queries])
    with progress_bar(f"{context.engine.name} {split}", len(specs) * queries) as advance:
        reports = await evaluate(context, dataset, specs, split=split, max_queries=max_queries,
                                 query_ids=query_ids, on_query=advance)
    qrels = dataset.qrels(split)
    robust = robustness_against(reports, qrels, REFERENCE)
    return {report.spec.label: describe(report, qrels, labeler_cost,
                                        robust.get(report.spec.label))
            for report in reports}


def describe(
    report: MethodReport, qrels: dict[str, dict[str, int]], labeler_cost: LabelerCost | None,
    robust: Robustness | None = None,
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        **report.summary(),
        "queries": len(report.latencies_ms),
        "engine_calls_mean": round(float(np.mean(
            [r.engine_calls for r in report.results.values()])), 2),
        "uses_judgements": report.spec.name in USES_JUDGEMENTS,
        "latencies_ms": [round(ms, 2) for ms in report.latencies_ms],
        # the first query's trace, as the sidecar's ext.tour shows it
        "example_trace": next(iter(report.results.values())).to_dict(),
    }
    if labeler_cost is not None:
        cold = [ms + pairs * labeler_cost.ms_per_doc
                for ms, pairs in zip(report.latencies_ms, report.pairs_scored, strict=True)]
        summary["latency_ms_p50_cold"] = round(float(np.percentile(cold, 50)), 1)
        summary["latency_ms_p95_cold"] = round(float(np.percentile(cold, 95)), 1)
    if robust is not None:
        summary["robustness"] = robust.to_dict()
    per_round = ndcg_per_round(report, qrels)
    if len(per_round) > 1:
        summary["ndcg@10_per_round"] = per_round
    operators = operator_counts(report)
    if operators:
        summary["operators"] = operators
    return summary


def _round_rankings(report: MethodReport) -> dict[str, list[list[str]]]:
    """qid -> the top ids the method would have returned after each round."""
    rankings = {}
    for qid, result in report.results.items():
        per_round = [r.ranking for r in result.rounds]
        if all(per_round):
            rankings[qid] = per_round
    return rankings


def ndcg_per_round(report: MethodReport, qrels: dict[str, dict[str, int]]) -> list[float]:
    """nDCG@10 after round 0, 1, …; a query that stopped early keeps its last ranking."""
    rankings = _round_rankings(report)
    if not rankings:
        return []
    rounds = max(len(r) for r in rankings.values())
    scores = []
    for t in range(rounds):
        run = {qid: {doc: float(-rank) for rank, doc in enumerate(r[min(t, len(r) - 1)])}
               for qid, r in rankings.items()}
        scores.append(round(score_run(qrels, run)["ndcg@10"], 4))
    return scores


def operator_counts(report: MethodReport) -> dict[str, int]:
    """How often each Δq operator was chosen: term, +, -, ^w, or TOUR's step (agents only)."""
    chosen = [r.chosen for result in report.results.values() for r in result.rounds
              if isinstance(r, AgentRound) and r.chosen]
    return dict(Counter(_operator(text) for text in chosen))


def _operator(rendered: str) -> str:
    if rendered == TourStep().render():
        return "tour"
    if rendered.startswith(("+", "-")):
        return rendered[0]
    if "^" in rendered:
        return "^" + rendered.rsplit("^", 1)[1]
    return "term"


@dataclass(frozen=True)
class Sweep:
    """One parameter varied around a base method; the rest stay at the base's values."""

    base: str
    parameter: str
    values: tuple[Any, ...]

    def methods(self) -> list[str]:
        """The base with the parameter at each value, in place of any the base sets."""
        name, *options = self.base.split(":")
        kept = [option for option in options if option.split("=")[0] != self.parameter]
        return [":".join([name, *kept, f"{self.parameter}={value}"]) for value in self.values]


TOUR_SWEEPS = (
    Sweep("tour-hard:k=10:max_rounds=3", "lr", (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)),
    Sweep("tour-hard:k=10:max_rounds=3", "k", (10, 20, 40)),
    Sweep("tour-hard:k=10:lr=0.2", "max_rounds", (1, 2, 3, 5)),
    Sweep("tour-hard:k=10:max_rounds=3", "lam", (0.0, 0.25, 0.5, 0.75, 1.0)),
    Sweep("tour-hard:k=10:max_rounds=3", "p", (0.3, 0.5, 0.7, 0.9)),
    # a dual-encoder labeler's cosines span ~0.1 over a top-10, a cross-encoder's logits
    # several units: τ sets how peaked softmax(φ/τ) is, so it is swept down to 0.02
    Sweep("tour-hard:k=10:max_rounds=3", "tau", (0.02, 0.05, 0.1, 0.5, 1.0)),
    Sweep("tour-soft:k=10:max_rounds=3", "lr", (0.1, 0.2, 0.5, 1.0)),
    Sweep("tour-soft:k=10:max_rounds=3", "tau", (0.02, 0.05, 0.1, 0.5, 1.0)),
)
AGENT_SWEEPS = (
    Sweep("learned-agent", "m", (3, 5, 10)),
    Sweep("learned-agent", "max_rounds", (1, 3, 5)),
    Sweep("rm3-agent", "max_rounds", (1, 3, 5)),
)


async def run_sweeps(
    context: SearchContext, dataset: BeirDataset, sweeps: Sequence[Sweep],
    query_ids: Collection[str],
) -> list[dict[str, Any]]:
    """Each sweep on the given train queries: value -> nDCG@10 and pairs, and the best."""
    rows = []
    for sweep in sweeps:
        results = await run_methods(context, dataset, sweep.methods(), "train", None,
                                    query_ids=query_ids)
        # values as text, the form they take in results.json
        settings = [(str(value), results[label])
                    for value, label in zip(sweep.values, sweep.methods(), strict=True)]
        scores: dict[str, float] = {value: summary["ndcg@10"] for value, summary in settings}
        best = max(scores, key=lambda value: scores[value])
        rows.append({"base": sweep.base, "parameter": sweep.parameter, "ndcg@10": scores,
                     "pairs": {value: summary["pairs_scored_mean"] for value, summary in settings},
                     "best": best})
    return rows


async def ingest_speed(
    context: SearchContext, dataset: BeirDataset, docs: int, index: str = "bench-ingest"
) -> dict[str, float]:
    """docs/s of embedding alone and of embedding plus bulk indexing, alternated twice."""
    texts = [doc.contents for doc in list(dataset.corpus())[:docs]]
    embed_rates, ingest_rates = [], []
    for _ in range(2):
        started = time.perf_counter()
        context.encoder.encode_docs(texts)
        embed_rates.append(len(texts) / (time.perf_counter() - started))
        report = await ingest(context.engine, dataset, index, context.encoder, replace=True,
                              reuse_embeddings=False, show_progress=False, max_docs=docs)
        ingest_rates.append(report.docs_per_s)
    await context.engine.delete_index(index)
    embed, indexed = float(np.mean(embed_rates)), float(np.mean(ingest_rates))
    return {"docs": len(texts), "embed_docs_per_s": round(embed, 1),
            "ingest_docs_per_s": round(indexed, 1), "ratio": round(indexed / embed, 3)}
