"""A refined search's answer in the engine's own shape, with the trace under `ext.tour`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from es_tour.pipeline import RankedHit, RoundTrace, SearchResult, Timings
from es_tour.server._fetch import Fetched, PagePlan


def render(result: SearchResult, plan: PagePlan, fetched: Fetched,
           overview: Mapping[str, Any], took_ms: float,
           extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{took, timed_out, _shards, hits: {total, max_score, hits}, aggregations, ext: {tour}}.

    The hits are the engine's, as it fetched them (`_fetch`); es-tour sets their order and,
    within its window, their `_score`. `hits.total`, `_shards` and the aggregations are
    the engine's own for the request's query (`overview`, a size-0 search).
    `ext.tour.hits` says, for each hit of the page from the window in order, the round that
    first retrieved it, the retrievers that returned it and its labeler score.
    """
    ranked = {hit.id: hit for hit in result.hits}
    in_window = set(plan.ids)
    window = [hit for hit in fetched.hits if hit.get("_id") in in_window]
    hits = [_ordered(hit, ranked[hit["_id"]].score, fetched.hide_ids)
            if hit.get("_id") in in_window else hit for hit in fetched.hits]
    engine_hits = overview.get("hits", {})
    # the best score of the whole answer, as the engine's max_score is: the window's first
    scores = [h.score for h in result.hits[:1]] or [
        h["_score"] for h in hits if h.get("_score") is not None]
    found: dict[str, Any] = {"max_score": max(scores, default=None), "hits": hits}
    if "total" in engine_hits:  # track_total_hits: false leaves it out, as the engine does
        found = {"total": engine_hits["total"], **found}
    answer: dict[str, Any] = {
        "took": round(took_ms),
        "timed_out": bool(overview.get("timed_out", False) or fetched.timed_out),
        "_shards": overview.get("_shards",
                                {"total": 1, "successful": 1, "skipped": 0, "failed": 0}),
        "hits": found,
    }
    if "aggregations" in overview:
        answer["aggregations"] = overview["aggregations"]
    traced = [ranked[hit["_id"]].trace() for hit in window]
    answer["ext"] = {"tour": {**result.to_dict(), "hits": traced, **(extra or {})}}
    return answer


def as_the_engine_ranks(answer: Mapping[str, Any], method: str, options: Mapping[str, Any],
                        timings: Timings, extra: Mapping[str, Any],
                        degraded_reason: str | None = None) -> dict[str, Any]:
    """The engine's own answer to the request as sent, for a method whose order is the
    engine's for the request's query (bm25), or (`degraded_reason`) one that cannot refine
    for this caller: every hit, total, aggregation and fetch option is the engine's, with
    the trace of the one round it ran under ext.tour."""
    hits = answer.get("hits", {}).get("hits", [])
    ranked = [RankedHit(hit["_id"], float(hit.get("_score") or 0.0), {}, 0, ("bm25",))
              for hit in hits]
    ids = [hit.id for hit in ranked]
    trace = RoundTrace(round=0, retrieved=len(ids), newly_scored=0, ranking=ids,
                       new_docs=len(ids), timings=timings)
    result = SearchResult(method, ranked, [trace], 0, 1, timings, dict(options),
                          degraded=degraded_reason is not None)
    tour = {**result.to_dict(), "hits": [hit.trace() for hit in ranked], **extra,
            **({} if degraded_reason is None else {"degraded_reason": degraded_reason})}
    return {**answer, "took": round(timings.total_ms), "ext": {"tour": tour}}


def _ordered(hit: Mapping[str, Any], score: float, hide_id: bool) -> dict[str, Any]:
    """A hit of the window with es-tour's score, and its sort value when sorted by score;
    without its `_id` when the request asked for none."""
    ordered = {**hit, "_score": score, **({"sort": [score]} if "sort" in hit else {})}
    if hide_id:
        del ordered["_id"]
    return ordered
