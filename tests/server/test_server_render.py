"""A SearchResult rendered as the engine's search response."""

from __future__ import annotations

import pytest

from es_tour.errors import ConfigError
from es_tour.pipeline import RankedHit, RoundTrace, SearchResult, Timings
from es_tour.server import parse_listen
from es_tour.server._render import filter_source, render
from es_tour.server._request import SourceFilter, parse_search


def _result(n: int) -> SearchResult:
    hits = [RankedHit(str(i), 1.0 - i / 10, {"title": f"t{i}", "meta": {"a": 1, "b": 2}})
            for i in range(n)]
    return SearchResult("tour-hard", hits, [RoundTrace(0, n, n)], n, 1, Timings(), {"k": n})


def test_from_and_size_page_the_ranking_and_trace_goes_under_ext_tour() -> None:
    request = parse_search("idx", {}, {"query": {"match": {"t": "q"}}, "from": 1, "size": 2},
                           explicit=False)
    body = render(_result(4), request, 12.3)
    assert [h["_id"] for h in body["hits"]["hits"]] == ["1", "2"]
    assert body["hits"]["max_score"] == pytest.approx(0.9)
    assert body["hits"]["total"] == {"value": 4, "relation": "eq"}
    assert body["ext"]["tour"]["method"] == "tour-hard" and body["ext"]["tour"]["rounds"]
    assert body["took"] == 12 and body["hits"]["hits"][0]["_index"] == "idx"


def test_source_filtering_follows_the_engines_patterns() -> None:
    source = {"title": "t", "meta": {"a": 1, "b": 2}, "other": 3}
    assert filter_source(source, SourceFilter(includes=("meta.a",))) == {"meta": {"a": 1}}
    assert filter_source(source, SourceFilter(includes=("t*",))) == {"title": "t"}
    assert filter_source(source, SourceFilter(excludes=("meta.b", "other"))) == \
        {"title": "t", "meta": {"a": 1}}


def test_source_false_drops_source() -> None:
    request = parse_search("idx", {}, {"query": {"match": {"t": "q"}}, "_source": False},
                           explicit=False)
    assert "_source" not in render(_result(1), request, 1.0)["hits"]["hits"][0]


def test_listen_is_host_and_port() -> None:
    assert parse_listen("127.0.0.1:9201") == ("127.0.0.1", 9201)
    with pytest.raises(ConfigError):
        parse_listen("9201")


def test_ext_tour_hits_trace_the_page_hits_in_order() -> None:
    result = _result(4)
    result.hits[2] = RankedHit("2", 0.8, {}, round=1, retrieved_by=("bm25", "knn"), label=0.25)
    request = parse_search("idx", {}, {"query": {"match": {"t": "q"}}, "from": 1, "size": 2},
                           explicit=False)
    traced = render(result, request, 1.0)["ext"]["tour"]["hits"]
    assert traced == [
        {"_id": "1", "round": None, "retrieved_by": [], "label": None},
        {"_id": "2", "round": 1, "retrieved_by": ["bm25", "knn"], "label": 0.25},
    ]
