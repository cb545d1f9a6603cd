"""Every answer means what the engine's would: request shapes an application sends, each sent
to the engine and to the sidecar with the recommended settings on (es_tour/recommended.py),
on both engines.

Each shape has one of two verdicts, checked here:
- "refined, semantics kept": the sidecar refined it (ext.tour), and its answer keeps the
  engine's meaning: the same hits.total, aggregations, page length and hit fields, the
  engine's own fetch of each doc both answers show, and the shape's constraint on every hit;
- "passed through, identical to the engine": the sidecar said why (X-Es-Tour-Passthrough)
  and answered what the engine answered.

The index is SciFact with a synthetic `year` and `topic` per doc (es_tour.datasets), so
whether a hit keeps a filter is read off its id. With ES_TOUR_SEMANTICS_PAGE set (`make
bench-semantics`), the verdicts are written to that page, and docs/sidecar.md's table of
what is refined is rewritten from them.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from es_tour.bench.semantics import PASSED, REFINED, Verdict, write_pages
from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset, synthetic_metadata
from es_tour.engines import connect
from es_tour.ingest import ingest
from es_tour.recommended import FRONTIER_20
from es_tour.server import PASSTHROUGH_HEADER, BackgroundServer, Models, ServerConfig
from integration_tests.conftest import remember_scifact

ENGINES = ("opensearch", "elasticsearch")
INDEX, OTHER, ALIAS = "it-semantics", "it-semantics-b", "it-semantics-biology"
QUERY = "vitamin D deficiency and bone health"
MATCH = {"match": {"text": QUERY}}
DEEP = {"query": {"match": {"text": "cell protein expression in patients"}}}  # 3,917 docs
# hit keys the engine gives only some docs of a page: a highlight needs a fragment, a named
# query a match; `_ignored` and `_routing` are the doc's own
OWN = frozenset({"_ignored", "_routing"})
SOME_HITS = frozenset({"highlight", "matched_queries"}) | OWN
# keys whose value is the refinement's: the order's score, and the engine's explanation of
# the fetch (the request's query beside the page's ids)
OURS = frozenset({"_score", "_explanation"})
# parts of an answer that differ between two identical calls
VOLATILE = frozenset({"took", "_scroll_id", "pit_id"})


def _meta(predicate: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], bool]:
    return lambda hit: predicate(synthetic_metadata(hit["_id"]))


@dataclass(frozen=True)
class Shape:
    """One request shape: its body (and URL parameters, and path), the verdict it must get,
    and what every hit of a refined answer must keep (on its doc's metadata)."""

    name: str
    body: dict[str, Any] | None
    verdict: str
    kept: str = "hits.total, aggregations, page length and hit fields are the engine's"
    params: dict[str, str] = field(default_factory=dict)
    target: str = INDEX
    holds: Callable[[dict[str, Any]], bool] | None = None
    same_hits: bool = False  # passed through answers that differ only in timings (profile)
    engines: tuple[str, ...] = ("opensearch", "elasticsearch")


def _q(**extra: Any) -> dict[str, Any]:
    return {"query": MATCH, **extra}


def _bool(**clauses: Any) -> dict[str, Any]:
    return {"query": {"bool": {"must": [MATCH], **clauses}}}


def _qs(text: str, **options: Any) -> dict[str, Any]:
    return {"query": {"query_string": {"query": text, "default_field": "text", **options}}}


AGGS = {"topics": {"terms": {"field": "topic"}},
        "years": {"histogram": {"field": "year", "interval": 5}}}
HIGHLIGHT = {"fields": {"text": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]}
BIOLOGY = {"term": {"topic": "biology"}}

SHAPES = [
    Shape("match", _q(), REFINED),
    Shape("bool with filter", _bool(filter=[{"term": {"topic": "medicine"}}]), REFINED,
          "every hit has topic medicine", holds=_meta(lambda m: m["topic"] == "medicine")),
    Shape("bool with must_not", _bool(must_not=[{"range": {"year": {"lt": 2010}}}]), REFINED,
          "no hit is from before 2010", holds=_meta(lambda m: m["year"] >= 2010)),
    Shape("post_filter", {**_q(), "post_filter": BIOLOGY}, REFINED,
          "every hit has topic biology; the total counts after the post_filter",
          holds=_meta(lambda m: m["topic"] == "biology")),
    Shape("post_filter with aggs", {**_q(), "post_filter": BIOLOGY, "aggs": AGGS}, REFINED,
          "aggregations before the post_filter, hits after it",
          holds=_meta(lambda m: m["topic"] == "biology")),
    Shape("aggs", {**_q(), "aggs": AGGS}, REFINED, "the engine's aggregations"),
    Shape("aggs, typed_keys", {**_q(), "aggs": AGGS}, REFINED, "typed aggregation names",
          params={"typed_keys": "true"}),
    Shape("highlight", {**_q(), "highlight": HIGHLIGHT}, REFINED, "the engine's highlight"),
    Shape("aggs and highlight", {**_q(), "aggs": AGGS, "highlight": HIGHLIGHT}, REFINED),
    Shape("named queries", {"query": {"bool": {
        "must": [{"match": {"text": {"query": QUERY, "_name": "words"}}}],
        "filter": [{"range": {"year": {"gte": 2005, "_name": "recent"}}}]}}}, REFINED,
        "matched_queries name the filter on every hit",
        holds=lambda hit: "recent" in hit.get("matched_queries", [])),
    Shape("explain", {**_q(), "explain": True}, REFINED, "every hit has the engine's _explanation",
          holds=lambda hit: "_explanation" in hit),
    Shape("track_total_hits true", {**_q(), "track_total_hits": True}, REFINED),
    Shape("track_total_hits false", {**_q(), "track_total_hits": False}, REFINED,
          "no hits.total, as the engine gives none"),
    Shape("track_total_hits 100", {**_q(), "track_total_hits": 100}, REFINED,
          "the total stops at 100 with relation gte"),
    Shape("rest_total_hits_as_int", _q(), REFINED, "the total as a number",
          params={"rest_total_hits_as_int": "true"}),
    Shape("size 0", {**_q(), "size": 0, "aggs": AGGS}, PASSED),
    Shape("from 995", {**DEEP, "from": 995, "size": 10}, REFINED,
          "the engine's order past the window, up to the engine's own limit"),
    Shape("from 1500", {**DEEP, "from": 1500, "size": 10}, REFINED),
    Shape("from 9990", {**DEEP, "from": 9990, "size": 10}, REFINED),
    Shape("from 9995, past max_result_window", {**_q(), "from": 9995, "size": 10}, PASSED),
    Shape("_source false", {**_q(), "_source": False}, REFINED),
    Shape("_source includes", {**_q(), "_source": {"includes": ["title", "year"]}}, REFINED),
    Shape("_source excludes", {**_q(), "_source": {"excludes": ["text", "embedding"]}},
          REFINED),
    Shape("_source_includes parameter", _q(), REFINED, params={"_source_includes": "title"}),
    Shape("fields", {**_q(), "fields": ["year", "topic"], "_source": False}, REFINED),
    Shape("docvalue_fields", {**_q(), "docvalue_fields": ["year"]}, REFINED),
    Shape("stored_fields", {**_q(), "stored_fields": ["year"]}, REFINED),
    Shape("stored_fields _none_", {**_q(), "stored_fields": "_none_"}, REFINED,
          "hits without _id, as the engine's"),
    Shape("version", {**_q(), "version": True}, REFINED),
    Shape("seq_no_primary_term", {**_q(), "seq_no_primary_term": True}, REFINED),
    # Elasticsearch's integ-test zip has no painless (its modules are not published)
    Shape("script_fields", {**_q(), "script_fields": {"decade": {"script": {
        "source": "doc['year'].value / 10"}}}}, REFINED, engines=("opensearch",)),
    Shape("sort by a field", {**_q(), "sort": [{"year": "desc"}]}, PASSED),
    Shape("sort by _score", {**_q(), "sort": ["_score"]}, REFINED),
    Shape("search_after", {**_q(), "sort": [{"year": "desc"}, {"_doc": "asc"}],
                           "search_after": [2015, 10]}, PASSED),
    Shape("collapse", {**_q(), "collapse": {"field": "topic"}}, PASSED),
    Shape("min_score", {**_q(), "min_score": 5.0}, PASSED),
    Shape("terminate_after", {**_q(), "terminate_after": 50}, PASSED),
    Shape("suggest", {**_q(), "suggest": {"fix": {"text": "vitamn", "term": {"field": "text"}}}},
          PASSED),
    Shape("profile", {**_q(), "profile": True}, PASSED, same_hits=True),
    Shape("rescore", {**_q(), "rescore": {"window_size": 20, "query": {
        "rescore_query": {"match": {"title": "bone"}}}}}, PASSED),
    Shape("indices_boost", {**_q(), "indices_boost": [{INDEX: 2.0}]}, PASSED),
    Shape("function_score", {"query": {"function_score": {"query": MATCH,
                                                          "field_value_factor": {
                                                              "field": "year"}}}}, PASSED),
    Shape("dis_max", {"query": {"dis_max": {"queries": [
        {"match": {"title": QUERY}}, {"match": {"text": QUERY}}], "tie_breaker": 0.3}}},
        REFINED),
    Shape("operator and", {"query": {"match": {"text": {"query": "vitamin deficiency",
                                                         "operator": "and"}}}}, REFINED),
    Shape("minimum_should_match", {"query": {"match": {"text": {
        "query": QUERY, "minimum_should_match": "75%"}}}}, REFINED),
    Shape("query_string with field clauses", _qs("stem cells +year:(2010 OR 2011)"), REFINED,
          "every hit is from 2010 or 2011", holds=_meta(lambda m: m["year"] in (2010, 2011))),
    Shape("query_string NOT", _qs("vitamin deficiency NOT topic:biology"), REFINED,
          "no hit has topic biology", holds=_meta(lambda m: m["topic"] != "biology")),
    Shape("query_string phrase", _qs('"vitamin D" bone'), REFINED),
    Shape("query_string range", _qs("vitamin +year:[2005 TO 2012]"), REFINED,
          "every hit is from 2005 to 2012", holds=_meta(lambda m: 2005 <= m["year"] <= 2012)),
    Shape("query_string wildcard", _qs("vitam* bone"), REFINED),
    Shape("simple_query_string", {"query": {"simple_query_string": {
        "query": "vitamin + (deficiency | bone)", "fields": ["title", "text"]}}}, REFINED),
    Shape("URI search q=", None, PASSED, params={"q": "vitamin"}),
    Shape("search_type dfs", _q(), REFINED, params={"search_type": "dfs_query_then_fetch"}),
    Shape("scroll", _q(), PASSED, params={"scroll": "1m"}),
    Shape("multi-index", _q(), PASSED, target=f"{INDEX},{OTHER}"),
    Shape("wildcard target", _q(), PASSED, target="it-semantics*"),
    Shape("filtered alias", _q(), REFINED, "every hit has the alias's topic, biology",
          target=ALIAS, holds=_meta(lambda m: m["topic"] == "biology")),
    *(Shape(f"?{key}={value}", _q(), verdict, kept or Shape.kept, params={key: value},
            holds=holds)
      for key, value, verdict, kept, holds in [
          ("timeout", "30s", REFINED, "the engine's search timeout on each engine call", None),
          ("request_cache", "true", REFINED, "", None),
          ("preference", "_local", REFINED, "", None),
          ("allow_partial_search_results", "false", REFINED, "", None),
          ("ignore_unavailable", "true", REFINED, "", None),
          ("allow_no_indices", "true", REFINED, "", None),
          ("expand_wildcards", "open", REFINED, "", None),
          ("max_concurrent_shard_requests", "3", REFINED, "", None),
          ("pre_filter_shard_size", "1", REFINED, "", None),
          ("batched_reduce_size", "2", REFINED, "", None),
          ("ccs_minimize_roundtrips", "false", REFINED, "", None),
          ("search_type", "query_then_fetch", REFINED, "", None),
          ("track_total_hits", "100", REFINED, "the total stops at 100 with relation gte", None),
          ("track_total_hits", "false", REFINED, "no hits.total, as the engine gives none", None),
          ("track_scores", "true", REFINED, "", None),
          ("size", "5", REFINED, "a page of 5", None),
          ("from", "3", REFINED, "the page from 3", None),
          ("sort", "_score", REFINED, "", None),
          ("_source", "false", REFINED, "hits without _source", None),
          ("_source_excludes", "text", REFINED, "", None),
          ("stored_fields", "_none_", REFINED, "hits without _id, as the engine's", None),
          ("docvalue_fields", "year", REFINED, "the engine's fields", None),
          ("explain", "true", REFINED, "every hit has the engine's _explanation",
           lambda hit: "_explanation" in hit),
          ("version", "true", REFINED, "every hit has its _version",
           lambda hit: "_version" in hit),
          ("seq_no_primary_term", "true", REFINED, "every hit has its _seq_no",
           lambda hit: "_seq_no" in hit and "_primary_term" in hit),
          ("rest_total_hits_as_int", "true", REFINED, "the total as a number", None),
          ("pretty", "true", REFINED, "", None),
          ("human", "true", REFINED, "", None),
          ("error_trace", "true", REFINED, "", None),
          ("routing", "a", PASSED, "", None),
          ("sort", "year:desc", PASSED, "", None),
          ("terminate_after", "50", PASSED, "", None),
          ("filter_path", "hits.total,hits.hits._id", PASSED, "", None),
          ("q", "vitamin", PASSED, "", None),
          ("df", "title", PASSED, "", None),
          ("analyzer", "standard", PASSED, "", None),
          ("default_operator", "AND", PASSED, "", None),
          ("lenient", "true", PASSED, "", None),
          ("ignore_throttled", "false", PASSED, "", None),
          ("include_named_queries_score", "true", PASSED, "", None),
          ("request_timeout", "30", PASSED, "", None),
          ("ignore", "404", PASSED, "", None),
      ]),
]
VERDICTS: dict[tuple[str, str], Verdict] = {}


@dataclass
class Pair:
    engine: str
    sidecar: str
    direct: str


@pytest.fixture(scope="module", params=ENGINES)
async def pair(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
               scifact: BeirDataset, scifact_index: str, sidecar_models: Models
               ) -> AsyncIterator[Pair]:
    engine, url = request.param, nodes[request.param].url
    async with connect(engine, url) as adapter:
        await ingest(adapter, scifact, INDEX, sidecar_models.encoder, if_missing=True,
                     metadata=True, show_progress=False)
        await ingest(adapter, scifact, OTHER, sidecar_models.encoder, if_missing=True,
                     metadata=True, show_progress=False, max_docs=50, reuse_embeddings=False)
    _route_some(url)
    aliased = httpx.post(f"{url}/_aliases", json={"actions": [
        {"add": {"index": INDEX, "alias": ALIAS, "filter": BIOLOGY}}]})
    assert aliased.status_code == 200, aliased.text
    for name in (INDEX, OTHER):
        put = httpx.put(f"{url}/{name}/_settings", json={**FRONTIER_20})
        assert put.status_code == 200, put.text
    remember_scifact(sidecar_models, scifact, INDEX)
    config = ServerConfig(upstream=url, deadline_ms=120_000, max_refinements=4)
    with BackgroundServer(config, sidecar_models) as server:
        yield Pair(engine, server.url, url)


def _route_some(url: str) -> None:
    """Index again, with a routing, the docs the query's own top 5 holds: a refined page
    holds them, and the engine's hits show each one's `_routing`."""
    top = httpx.post(f"{url}/{INDEX}/_search", json={"query": MATCH, "size": 5}).json()
    for hit in top["hits"]["hits"]:
        if "_routing" not in hit:
            put = httpx.put(f"{url}/{INDEX}/_doc/{hit['_id']}", json=hit["_source"],
                            params={"routing": "routed", "refresh": "true"})
            assert put.status_code == 200, put.text


@pytest.fixture(scope="module", autouse=True)
def page() -> Iterator[None]:
    yield
    out = os.environ.get("ES_TOUR_SEMANTICS_PAGE")
    if out and len(VERDICTS) == sum(len(shape.engines) for shape in SHAPES):
        write_pages(list(VERDICTS.values()), Path(out), ENGINES)


def _send(url: str, shape: Shape) -> httpx.Response:
    path = f"{url}/{shape.target}/_search"
    if shape.body is None:
        return httpx.get(path, params=shape.params, timeout=300)
    return httpx.post(path, params=shape.params, json=shape.body, timeout=300)


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key not in VOLATILE}


def _hit_keys(hit: dict[str, Any]) -> set[str]:
    return set(hit) - SOME_HITS


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_every_shape_keeps_the_engines_meaning(pair: Pair, shape: Shape) -> None:
    if pair.engine not in shape.engines:
        pytest.skip(f"{pair.engine}'s test node cannot run this shape at all")
    theirs, ours = _send(pair.direct, shape), _send(pair.sidecar, shape)
    reason = ours.headers.get(PASSTHROUGH_HEADER)
    refined = reason is None and "ext" in ours.json()
    VERDICTS[(shape.name, pair.engine)] = Verdict(
        shape.name, pair.engine, REFINED if refined else PASSED, shape.kept if refined else "",
        reason or "")
    assert ours.status_code == theirs.status_code, (ours.text[:500], theirs.text[:500])
    mine, engines = ours.json(), theirs.json()
    if shape.verdict == PASSED:
        assert reason, f"{shape.name} was refined: {mine.get('ext', {}).get('tour', {})}"
        if shape.same_hits:
            assert mine["hits"] == engines["hits"]
        else:
            assert _comparable(mine) == _comparable(engines)
        return
    assert refined and ours.status_code == 200, f"{shape.name} passed through: {reason}"
    assert mine["hits"].get("total") == engines["hits"].get("total")
    assert mine.get("aggregations") == engines.get("aggregations")
    hits, expected = mine["hits"]["hits"], engines["hits"]["hits"]
    assert len(hits) == len(expected), (len(hits), len(expected))
    assert hits or shape.body.get("from", 0) >= 9990, "a property held by no hit says nothing"
    assert len({hit.get("_id") for hit in hits}) == len(hits) or shape.name.endswith("_none_")
    if expected:
        assert {frozenset(_hit_keys(hit)) for hit in hits} == {frozenset(_hit_keys(expected[0]))}
    for name in SOME_HITS - OWN:  # what the engine gives some docs, ours give some
        assert any(name in hit for hit in hits) == any(name in hit for hit in expected), name
    by_id = {hit.get("_id"): hit for hit in expected}
    for hit in hits:
        if "_id" in hit and hit["_id"] in by_id:  # the engine's fetch of that doc, as is
            assert {k: v for k, v in hit.items() if k not in OURS} == \
                {k: v for k, v in by_id[hit["_id"]].items() if k not in OURS}
        if shape.holds is not None:
            assert shape.holds(hit), (shape.name, hit["_id"], hit.get("matched_queries"))
    # the window's hits come first, in es-tour's order
    scores = [hit["_score"] for hit in hits[: len(mine["ext"]["tour"]["hits"])]]
    assert scores == sorted(scores, reverse=True)


# URL parameters with values the engines refuse, or take at their edge: the sidecar answers
# the engine's status (the engine judges each: it goes on to the engine's own calls)
EDGE_PARAMS = [("timeout", "1nanos"), ("size", "-1"), ("from", "x"), ("request_cache", "maybe"),
               ("batched_reduce_size", "1"), ("max_concurrent_shard_requests", "0"),
               ("pre_filter_shard_size", "0"), ("search_type", "bogus"),
               ("track_total_hits", "lots"), ("allow_partial_search_results", "maybe"),
               ("expand_wildcards", "bogus"), ("explain", "yes"), ("preference", "_shards:x"),
               ("timeout", "soon"), ("docvalue_fields", "nope"), ("sort", "_score:asc")]


@pytest.mark.parametrize(("key", "value"), EDGE_PARAMS,
                         ids=[f"{key}={value}" for key, value in EDGE_PARAMS])
def test_a_parameter_the_engine_refuses_gets_the_engines_status(pair: Pair, key: str,
                                                                value: str) -> None:
    shape = Shape(key, _q(), REFINED, params={key: value})
    theirs, ours = _send(pair.direct, shape), _send(pair.sidecar, shape)
    assert ours.status_code == theirs.status_code, (ours.text[:500], theirs.text[:500])
    if theirs.status_code != 200:
        assert ours.json()["error"]["type"] == theirs.json()["error"]["type"]


# `_msearch` URL parameters: the engine applies most to each search; filter_path prunes the
# whole answer and `explain` is no `_msearch` parameter, so those pass the call through
MSEARCH_PARAMS = [("typed_keys", "true"), ("rest_total_hits_as_int", "true"),
                  ("search_type", "dfs_query_then_fetch"), ("max_concurrent_searches", "2"),
                  ("pre_filter_shard_size", "1"), ("max_concurrent_shard_requests", "3"),
                  ("ccs_minimize_roundtrips", "false"), ("pretty", "true"),
                  ("filter_path", "responses.hits.total"), ("explain", "true")]


@pytest.mark.parametrize(("key", "value"), MSEARCH_PARAMS,
                         ids=[f"{key}={value}" for key, value in MSEARCH_PARAMS])
def test_msearch_url_parameters_keep_the_engines_meaning(pair: Pair, key: str,
                                                         value: str) -> None:
    lines = [{"index": INDEX}, {**_q(), "aggs": AGGS, "size": 5}]
    body = "".join(json.dumps(line) + "\n" for line in lines)

    def send(url: str) -> httpx.Response:
        return httpx.post(f"{url}/_msearch", params={key: value}, content=body, timeout=300,
                          headers={"content-type": "application/x-ndjson"})

    theirs, ours = send(pair.direct), send(pair.sidecar)
    assert ours.status_code == theirs.status_code, (ours.text[:500], theirs.text[:500])
    if theirs.status_code != 200:
        assert ours.json()["error"]["type"] == theirs.json()["error"]["type"]
        return
    (mine,), (engines,) = ours.json()["responses"], theirs.json()["responses"]
    if key in ("filter_path", "explain"):
        assert ours.headers.get(PASSTHROUGH_HEADER)
        assert _comparable(mine) == _comparable(engines)
        return
    assert "ext" in mine and PASSTHROUGH_HEADER not in ours.headers, mine.get("error")
    assert mine["hits"]["total"] == engines["hits"]["total"]
    assert mine["aggregations"] == engines["aggregations"]
    assert len(mine["hits"]["hits"]) == len(engines["hits"]["hits"]) == 5


def _ids(pair: Pair, start: int, size: int) -> list[str]:
    answer = httpx.post(f"{pair.sidecar}/{INDEX}/_search", timeout=300,
                        json={**_q(), "from": start, "size": size})
    assert answer.status_code == 200 and "ext" in answer.json(), answer.text[:300]
    return [hit["_id"] for hit in answer.json()["hits"]["hits"]]


def test_pages_across_the_window_stitch_without_gaps_or_duplicates(pair: Pair) -> None:
    whole = _ids(pair, 0, 130)
    pages = _ids(pair, 0, 50) + _ids(pair, 50, 50) + _ids(pair, 100, 30)
    assert len(whole) == 130 and len(set(whole)) == 130
    assert pages == whole == _ids(pair, 0, 130)
    window = set(whole[:100])
    # past the window: the engine's order for the query, less the window's docs
    engine = httpx.post(f"{pair.direct}/{INDEX}/_search", timeout=60,
                        json={**_q(), "size": 200, "_source": False}).json()
    rest = [hit["_id"] for hit in engine["hits"]["hits"] if hit["_id"] not in window]
    assert whole[100:] == rest[:30]


def test_a_page_of_names_alone_shows_each_docs_routing_as_the_engine_does(pair: Pair) -> None:
    """A `_source: false` page loads no stored field: its hits are named from the fetches
    of their text, `_routing` (and `_ignored`) as the engine shows them."""
    answer = httpx.post(f"{pair.sidecar}/{INDEX}/_search", timeout=300,
                        json={**_q(), "_source": False, "size": 10}).json()
    hits = answer["hits"]["hits"]
    assert "ext" in answer and any("_routing" in hit for hit in hits)
    engine = httpx.post(f"{pair.direct}/{INDEX}/_search", timeout=60, json={
        "query": {"ids": {"values": [hit["_id"] for hit in hits]}}, "_source": False,
        "size": len(hits)}).json()
    expected = {hit["_id"]: {k: v for k, v in hit.items() if k != "_score"}
                for hit in engine["hits"]["hits"]}
    assert {hit["_id"]: {k: v for k, v in hit.items() if k != "_score"} for hit in hits} \
        == expected


def test_the_window_is_an_index_setting(pair: Pair) -> None:
    def put(window: int | None) -> None:
        # through the sidecar, which forgets the settings it read of the index
        answer = httpx.put(f"{pair.sidecar}/{INDEX}/_settings",
                           json={"index.tour.window": window})
        assert answer.status_code == 200, answer.text

    put(20)
    try:
        answer = httpx.post(f"{pair.sidecar}/{INDEX}/_search", timeout=300,
                            json={**_q(), "size": 30}).json()
    finally:
        put(None)
    tour = answer["ext"]["tour"]
    assert tour["window"] == 20 and len(tour["hits"]) == 20
    ids = [hit["_id"] for hit in answer["hits"]["hits"]]
    engine = httpx.post(f"{pair.direct}/{INDEX}/_search", timeout=60,
                        json={**_q(), "size": 60, "_source": False}).json()
    rest = [hit["_id"] for hit in engine["hits"]["hits"] if hit["_id"] not in ids[:20]]
    assert ids[20:] == rest[:10]


def test_an_engine_error_in_the_request_is_the_engines_own_answer(pair: Pair) -> None:
    body = {**_q(), "aggs": {"years": {"histogram": {"field": "year", "interval": -5}}}}
    ours = httpx.post(f"{pair.sidecar}/{INDEX}/_search", json=body, timeout=300)
    theirs = httpx.post(f"{pair.direct}/{INDEX}/_search", json=body, timeout=60)
    assert ours.status_code == theirs.status_code == 400
    assert PASSTHROUGH_HEADER not in ours.headers  # the sidecar took it on, and said the same
    assert ours.json()["error"]["type"] == theirs.json()["error"]["type"]
