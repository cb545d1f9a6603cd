"""A SearchResult as the engine's own search response, with the trace under `ext.tour`."""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from es_tour.pipeline import SearchResult
from es_tour.server._request import SearchRequest, SourceFilter


def render(result: SearchResult, request: SearchRequest, took_ms: float,
           extra: Mapping[str, Any] | None = None, *,
           aggregations: Mapping[str, Any] | None = None,
           highlights: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{took, timed_out, _shards, hits: {total, max_score, hits}, aggregations, ext: {tour}}.

    `result.hits` is the ranking from rank 0; the page is `from`..`from + size`.
    `ext.tour.hits` says, for each hit of the page in order, the round that first retrieved
    it, the retrievers that returned it and its labeler score. `aggregations` and
    `highlights` (doc id -> the engine's highlight) are the engine's, as it gave them.
    """
    page = result.hits[request.from_: request.from_ + request.size]
    hits = []
    for hit in page:
        entry: dict[str, Any] = {"_index": request.index, "_id": hit.id, "_score": hit.score}
        if request.source.enabled:
            entry["_source"] = filter_source(hit.source, request.source)
        if highlights and hit.id in highlights:
            entry["highlight"] = highlights[hit.id]
        hits.append(entry)
    total: Any = {"value": len(result.hits), "relation": "eq"}
    if request.total_as_int:
        total = len(result.hits)
    answer: dict[str, Any] = {
        "took": round(took_ms),
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {"total": total, "max_score": max((h.score for h in page), default=None),
                 "hits": hits},
    }
    if aggregations is not None:
        answer["aggregations"] = aggregations
    answer["ext"] = {"tour": {**result.to_dict(), "hits": [hit.trace() for hit in page],
                              **(extra or {})}}
    return answer


def filter_source(source: Mapping[str, Any], spec: SourceFilter) -> dict[str, Any]:
    """`source` less what `_source` excludes: patterns match dotted paths, as in the engines."""
    return _filter(source, spec.includes, spec.excludes, "")


def _filter(node: Mapping[str, Any], includes: tuple[str, ...], excludes: tuple[str, ...],
            prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        path = f"{prefix}{key}"
        if any(fnmatchcase(path, p) for p in excludes):
            continue
        if not includes or any(fnmatchcase(path, p) for p in includes):
            # wholly included; excludes may still drop fields below it
            out[key] = (_filter(value, (), excludes, f"{path}.") if isinstance(value, Mapping)
                        else value)
        elif isinstance(value, Mapping):
            deeper = tuple(p for p in includes if p.startswith(f"{path}.") or "*" in p)
            inner = _filter(value, deeper, excludes, f"{path}.") if deeper else {}
            if inner:
                out[key] = inner
    return out
