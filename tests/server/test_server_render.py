"""A refined search's page: where its hits come from, the engine calls that fetch them, and
the answer rendered in the engine's shape."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from es_tour.engines import Overview, doc_key
from es_tour.errors import ConfigError
from es_tour.pipeline import FetchedDoc, RankedHit, RoundTrace, SearchResult, Timings
from es_tour.pipeline._doc_cache import kept_source_value
from es_tour.server import parse_listen
from es_tour.server._fetch import (
    Fetched,
    PageAhead,
    PagePlan,
    counted_by_a_leg,
    fetch_body,
    fetch_page,
    overview_body,
    plain_hits,
    plan_page,
    rest_body,
)
from es_tour.server._render import render

WINDOW = [str(i) for i in range(4)]
QUERY = {"match": {"text": {"query": "q", "_name": "words"}}}


def _result(n: int) -> SearchResult:
    hits = [RankedHit(str(i), 1.0 - i / 10, {}) for i in range(n)]
    return SearchResult("tour-hard", hits, [RoundTrace(0, n, n)], n, 1, Timings(), {"k": n})


def _engine_hit(doc: str, score: float = 7.0) -> dict:
    return {"_index": "idx-000001", "_id": doc, "_score": score, "_source": {"title": doc},
            "matched_queries": ["words"]}


def test_a_page_inside_the_window_is_the_windows_slice() -> None:
    assert plan_page(WINDOW, 1, 2) == PagePlan(("1", "2"), 0, 0)


def test_a_page_past_the_window_goes_on_in_the_engines_order_without_gaps() -> None:
    # ranks 3..6: the window's last doc, then the engine's first three past the window
    assert plan_page(WINDOW, 3, 4) == PagePlan(("3",), 0, 3)
    # ranks 10..19 are the engine's 6..15 once the window's 4 are left out
    assert plan_page(WINDOW, 10, 10) == PagePlan((), 6, 10)
    assert plan_page([], 0, 10) == PagePlan((), 0, 10)


def test_the_overview_counts_and_facets_the_request_as_sent_without_hits() -> None:
    body = {"query": QUERY, "from": 990, "size": 10, "aggs": {"t": {"terms": {"field": "t"}}},
            "track_total_hits": 100, "post_filter": {"term": {"t": "x"}}}
    assert overview_body(body) == {"query": QUERY, "aggs": body["aggs"], "size": 0,
                                   "track_total_hits": 100, "post_filter": body["post_filter"]}


def test_the_fetch_keeps_the_requests_options_and_restricts_it_to_the_pages_ids() -> None:
    body = {"query": QUERY, "size": 10, "from": 20, "_source": ["title"], "highlight": {
        "fields": {"text": {}}}, "explain": True, "aggs": {"a": {}}, "track_total_hits": True,
        "knn": {"field": "v", "query_vector": [1.0], "k": 5}}
    fetched = fetch_body(body, ["3", "1"])
    assert fetched["query"] == {"bool": {"filter": [{"ids": {"values": ["3", "1"]}}],
                                         "should": [QUERY]}}
    assert fetched["size"] == 2 and fetched["track_total_hits"] is False
    assert fetched["_source"] == ["title"] and fetched["explain"] is True
    assert fetched["highlight"] == body["highlight"]
    assert not {"aggs", "from", "knn"} & set(fetched)


def test_past_the_window_the_requests_own_search_leaves_the_windows_docs_out() -> None:
    body = {"query": QUERY, "size": 10, "post_filter": {"term": {"t": "x"}}}
    rest = rest_body(body, ["1", "2"], 6, 10)
    left_out = {"bool": {"must_not": [{"ids": {"values": ["1", "2"]}}]}}
    assert rest["query"] == {"bool": {"must": [QUERY], "filter": [left_out]}}
    assert (rest["from"], rest["size"], rest["post_filter"]) == (6, 10, body["post_filter"])
    knn_only = rest_body({"knn": {"field": "v", "query_vector": [1.0], "k": 5,
                                  "filter": {"term": {"t": "x"}}}}, ["1", "2"], 0, 3)
    assert "query" not in knn_only  # a query would add its own docs to the knn's
    assert knn_only["knn"]["filter"] == [{"term": {"t": "x"}}, left_out]


def test_the_answer_is_the_engines_hits_in_es_tours_order_with_the_engines_numbers() -> None:
    plan = plan_page(WINDOW, 2, 4)
    fetched = Fetched([_engine_hit("2"), _engine_hit("3"), _engine_hit("9", 5.0)], False)
    overview = {"hits": {"total": {"value": 2647, "relation": "eq"}}, "timed_out": False,
                "_shards": {"total": 3, "successful": 3, "skipped": 0, "failed": 0},
                "aggregations": {"t": {"buckets": []}}}
    answer = render(_result(4), plan, fetched, overview, 12.3)
    hits = answer["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["2", "3", "9"]
    assert [h["_score"] for h in hits] == [pytest.approx(0.8), pytest.approx(0.7), 5.0]
    assert hits[0]["matched_queries"] == ["words"] and hits[0]["_index"] == "idx-000001"
    assert answer["hits"]["total"] == {"value": 2647, "relation": "eq"}
    assert answer["hits"]["max_score"] == pytest.approx(1.0)
    assert answer["_shards"]["total"] == 3 and answer["aggregations"] == overview["aggregations"]
    assert answer["took"] == 12 and answer["ext"]["tour"]["method"] == "tour-hard"


def test_no_total_when_the_request_tracks_none() -> None:
    answer = render(_result(2), plan_page(["0", "1"], 0, 2),
                    Fetched([_engine_hit("0"), _engine_hit("1")], False), {"hits": {}}, 1.0)
    assert "total" not in answer["hits"]


def test_listen_is_host_and_port() -> None:
    assert parse_listen("127.0.0.1:9201") == ("127.0.0.1", 9201)
    with pytest.raises(ConfigError):
        parse_listen("9201")


def test_ext_tour_hits_trace_the_windows_hits_of_the_page_in_order() -> None:
    result = _result(4)
    result.hits[2] = RankedHit("2", 0.8, {}, round=1, retrieved_by=("bm25", "knn"), label=0.25)
    fetched = Fetched([_engine_hit("1"), _engine_hit("2"), _engine_hit("9")], False)
    traced = render(result, plan_page(["0", "1", "2"], 1, 3), fetched, {}, 1.0)
    assert traced["ext"]["tour"]["hits"] == [
        {"_id": "1", "round": None, "retrieved_by": [], "label": None},
        {"_id": "2", "round": 1, "retrieved_by": ["bm25", "knn"], "label": 0.25},
    ]


class _RoundTrip:
    """What a PageAhead reads of an engine view: the searches it joins to the round trip,
    each answered at once (the page with its ids' hits, the overview with a total)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.delay_s = 0.0  # how long each answer takes to come

    def known_id(self, doc: str) -> str:
        return doc

    def search_alongside(self, index: str, body: dict[str, Any]) -> asyncio.Future[dict]:
        self.bodies.append(body)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict] = loop.create_future()
        ids = body["query"]["bool"]["filter"][0]["ids"]["values"] if body["size"] else []
        result = {"hits": {"total": {"value": 9, "relation": "eq"},
                           "hits": [_engine_hit(doc) for doc in ids]}}
        if self.delay_s:
            loop.call_later(self.delay_s, answer.set_result, result)
        else:
            answer.set_result(result)
        return answer


async def test_a_page_among_the_labelled_docs_is_fetched_with_the_last_round() -> None:
    engine = _RoundTrip()
    ahead = PageAhead(engine, "idx", {"query": QUERY}, 1, 2, 4)  # type: ignore[arg-type]
    ahead.ask(["3", "1", "0", "2"])
    assert [body["size"] for body in engine.bodies] == [4, 0]  # every labelled doc; overview
    got = await ahead.fetched(plan_page(["0", "2", "1", "3"], 1, 2))
    assert got is not None
    fetched, overview = got
    assert [hit["_id"] for hit in fetched.hits] == ["2", "1"] and fetched.came_from == "engine"
    assert overview["hits"]["total"]["value"] == 9


async def test_a_page_past_the_labelled_docs_or_the_window_is_fetched_after_the_ranking(
        ) -> None:
    for from_, size, window in ((3, 2, 10), (0, 4, 3)):
        engine = _RoundTrip()
        ahead = PageAhead(engine, "idx", {"query": QUERY}, from_, size,  # type: ignore[arg-type]
                          window)
        ahead.ask(["3", "1", "0", "2"])
        assert engine.bodies == []
        assert await ahead.fetched(plan_page(["0", "2", "1", "3"], from_, size)) is None


async def test_a_ranking_that_left_the_labelled_docs_fetches_its_page_after_it() -> None:
    engine = _RoundTrip()
    ahead = PageAhead(engine, "idx", {"query": QUERY}, 0, 2, 10)  # type: ignore[arg-type]
    ahead.ask(["3", "1", "0", "2"])
    assert await ahead.fetched(plan_page(["7", "3"], 0, 2)) is None  # round 0's, past a deadline


async def test_a_page_asked_ahead_and_still_on_its_way_is_waited_for_not_asked_again() -> None:
    """A last round whose docs the doc cache held fetched no text: the ranking is done
    before the page's round trip, which is then waited for."""
    engine = _RoundTrip()
    engine.delay_s = 0.05
    ahead = PageAhead(engine, "idx", {"query": QUERY}, 0, 2, 4)  # type: ignore[arg-type]
    ahead.ask(["3", "1", "0", "2"])
    assert not any(answer.done() for answer in ahead._answers)
    got = await ahead.fetched(plan_page(["0", "2", "1", "3"], 0, 2))
    assert got is not None and [hit["_id"] for hit in got[0].hits] == ["0", "2"]
    assert len(engine.bodies) == 2  # the page and the overview, once


class _KeyedRoundTrip(_RoundTrip):
    """A view whose text fetches named some doc keys (`known_name`), answering a keyed page
    as the engine does: each hit its `_seq_no`, without a stored field."""

    def __init__(self, names: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.names = names

    def known_id(self, doc: str) -> str:
        return self.names[doc]["_id"] if doc in self.names else doc

    def known_name(self, doc: str) -> dict[str, Any] | None:
        return self.names.get(doc)

    def search_alongside(self, index: str, body: dict[str, Any]) -> asyncio.Future[dict]:
        self.bodies.append(body)
        answer: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        seq_nos = body["query"]["bool"]["filter"][0]["terms"]["_seq_no"] if body["size"] else []
        answer.set_result({"hits": {"hits": [
            {"_index": "idx", "_score": 1.0, "_seq_no": n, "_primary_term": 1}
            for n in seq_nos]}})
        return answer


async def test_a_page_that_shows_no_stored_field_loads_none_and_names_its_hits() -> None:
    """`_source: false`: the page's hits load no `_id` (most of its cost); each is named,
    `_routing` too, as the fetches of the docs' text met them."""
    keys = [doc_key(n) for n in range(3)]
    engine = _KeyedRoundTrip({keys[0]: {"_id": "a", "_routing": "r"}, keys[1]: {"_id": "b"},
                              keys[2]: {"_id": "c"}})
    ahead = PageAhead(engine, "idx", {"query": QUERY, "_source": False},  # type: ignore[arg-type]
                      0, 2, 4)
    ahead.ask(keys)
    page = engine.bodies[0]
    assert page["stored_fields"] == "_none_" and "_source" not in page
    got = await ahead.fetched(plan_page(["b", "a", "c"], 0, 2))
    assert got is not None
    assert got[0].hits == [{"_index": "idx", "_id": "b", "_score": 1.0},
                           {"_index": "idx", "_id": "a", "_routing": "r", "_score": 1.0}]


async def test_a_keyed_page_with_a_doc_no_fetch_named_is_fetched_after_the_ranking() -> None:
    keys = [doc_key(n) for n in range(2)]
    engine = _KeyedRoundTrip({keys[0]: {"_id": "a"}})
    ahead = PageAhead(engine, "idx", {"query": QUERY, "_source": False},  # type: ignore[arg-type]
                      0, 1, 4)
    ahead.ask(keys)
    assert await ahead.fetched(plan_page(["a", keys[1]], 0, 1)) is None


async def test_a_page_that_shows_a_stored_field_loads_them() -> None:
    for body in ({"query": QUERY}, {"query": QUERY, "_source": False, "highlight": {}},
                 {"query": QUERY, "_source": False, "docvalue_fields": ["year"]}):
        engine = _RoundTrip()
        PageAhead(engine, "idx", body, 0, 2, 4).ask(  # type: ignore[arg-type]
            ["3", "1", "0", "2"])
        assert "stored_fields" not in engine.bodies[0]


class _PageEngine:
    """What fetch_page reads of an engine view: one search, answered with a hit for each
    `_id` and doc key its filter names (a doc key's hit with its `_seq_no`, as asked)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def search(self, index: str, body: dict[str, Any], params: Any = None) -> dict:
        self.bodies.append(body)
        should = body["query"]["bool"]["filter"][0]["bool"]["should"]
        ids, seq_nos = should[0]["ids"]["values"], should[1]["terms"]["_seq_no"]
        hits = [_engine_hit(doc) for doc in ids] + [
            {**_engine_hit(f"doc-{seq_no}"), "_seq_no": seq_no, "_primary_term": 1}
            for seq_no in seq_nos]
        return {"hits": {"hits": hits[::-1]}}


async def test_a_page_asks_docs_named_by_doc_key_by_it_and_learns_their_ids() -> None:
    engine = _PageEngine()
    key = doc_key(7)
    fetched, _ = await fetch_page(engine, "idx", {"query": QUERY}, {},  # type: ignore[arg-type]
                                  [key, "a"], PagePlan((key, "a"), 0, 0))
    assert engine.bodies[0]["seq_no_primary_term"] is True
    assert [hit["_id"] for hit in fetched.hits] == ["doc-7", "a"]  # es-tour's order
    assert fetched.doc_names == {key: {"_id": "doc-7"}}
    assert not any("_seq_no" in hit or "_primary_term" in hit for hit in fetched.hits)


def test_a_leg_counts_the_overview_of_a_request_whose_query_it_runs_as_sent() -> None:
    body = {"query": QUERY, "size": 10, "_source": False, "track_total_hits": 100}
    assert counted_by_a_leg(body, {}, QUERY) == Overview({"track_total_hits": 100})
    assert counted_by_a_leg({"query": QUERY, "timeout": "1s"}, {}, QUERY) == Overview(
        {"timeout": "1s"})


def test_the_overview_goes_apart_where_a_leg_would_count_otherwise() -> None:
    """URL parameters (`_msearch` takes few), a post_filter the leg keeps as a filter, a
    top-level knn whose docs the total counts, aggregations (the request cache serves a
    size-0 search asked again), and a query no leg runs as sent (a text over the fields)."""
    assert counted_by_a_leg({"query": QUERY}, {"typed_keys": "true"}, QUERY) is None
    for key, value in (("post_filter", {"term": {"topic": "x"}}), ("knn", {"k": 3}),
                       ("aggs", {"t": {"terms": {"field": "topic"}}})):
        assert counted_by_a_leg({"query": QUERY, key: value}, {}, QUERY) is None
    assert counted_by_a_leg({"ext": {"tour": {"query_text": "q"}}}, {}, None) is None


async def test_a_page_ahead_asks_no_overview_a_leg_counted() -> None:
    engine = _RoundTrip()
    counted = Overview({}, asked=True, answer={"hits": {"total": {"value": 4, "relation": "eq"}}})
    ahead = PageAhead(engine, "idx", {"query": QUERY}, 0, 2, 4,  # type: ignore[arg-type]
                      counted)
    ahead.ask(["3", "1", "0", "2"])
    assert [body["size"] for body in engine.bodies] == [4]  # the page alone
    got = await ahead.fetched(plan_page(["0", "2", "1", "3"], 0, 2))
    assert got is not None and got[1]["hits"]["total"]["value"] == 4
    # a leg that was asked and failed counted nothing: the overview goes with the page
    engine = _RoundTrip()
    PageAhead(engine, "idx", {"query": QUERY}, 0, 2, 4,  # type: ignore[arg-type]
              Overview({}, asked=True)).ask(["3", "1", "0", "2"])
    assert [body["size"] for body in engine.bodies] == [4, 0]


PLAIN_QUERY = {"match": {"text": "q"}}


def _held(*docs: str) -> dict[str, FetchedDoc]:
    """Docs a search fetched to label, by doc key, each with its vector as its source held it."""
    return {doc_key(int(doc)): FetchedDoc(
        {"_id": f"id-{doc}", "_routing": "r"}, {"title": doc}, None, "idx-000001",
        ("embedding", kept_source_value([0.1, 1e-7, -2.5]))) for doc in docs}


def test_plain_hits_show_only_names_scores_and_whole_sources_or_none() -> None:
    for body in ({"query": PLAIN_QUERY}, {"query": PLAIN_QUERY, "_source": False},
                 {"query": PLAIN_QUERY, "_source": True, "size": 5, "from": 5,
                  "aggs": {"t": {"terms": {"field": "topic"}}}, "track_total_hits": True}):
        assert plain_hits(body), body
    for body in ({"query": QUERY},  # a named clause: matched_queries
                 {"query": {"bool": {"should": [PLAIN_QUERY, {"term": {"a": {
                     "value": "b", "_name": "n"}}}]}}},
                 {"query": PLAIN_QUERY, "_source": ["title"]},
                 {"query": PLAIN_QUERY, "highlight": {"fields": {"text": {}}}},
                 {"query": PLAIN_QUERY, "version": False},
                 {"query": PLAIN_QUERY, "sort": ["_score"]},
                 {"query": PLAIN_QUERY, "post_filter": {"term": {"a": "b"}}}):
        assert not plain_hits(body), body


def test_a_held_docs_whole_source_gives_every_number_as_it_came() -> None:
    doc = next(iter(_held("1").values()))
    assert doc.whole_source() == {"title": "1", "embedding": [0.1, 1e-7, -2.5]}
    kept = FetchedDoc({"_id": "a"}, {"title": "a"}, None, "idx",
                      ("embedding", kept_source_value([0, 1, 2])))  # integers stay integers
    assert kept.whole_source()["embedding"] == [0, 1, 2]
    assert all(type(value) is int for value in kept.whole_source()["embedding"])


@pytest.mark.parametrize("source", [True, False])
async def test_a_page_of_plain_hits_comes_from_the_held_docs_with_no_search(
        source: bool) -> None:
    engine = _RoundTrip()
    ahead = PageAhead(engine, "idx", {"query": PLAIN_QUERY, "_source": source},  # type: ignore[arg-type]
                      0, 2, 4, held=_held("3", "1", "0", "2"))
    assert ahead.ask([doc_key(3), doc_key(1), doc_key(0), doc_key(2)]) is None
    assert [body["size"] for body in engine.bodies] == [0]  # the overview alone
    got = await ahead.fetched(plan_page(["id-0", doc_key(2), "id-1"], 0, 2))
    assert got is not None
    fetched, overview = got
    expected = [{"_index": "idx-000001", "_id": f"id-{doc}", "_routing": "r", "_score": None,
                 **({"_source": {"title": doc, "embedding": [0.1, 1e-7, -2.5]}}
                    if source else {})} for doc in ("0", "2")]
    assert fetched.hits == expected and overview["hits"]["total"]["value"] == 9
    assert len(engine.bodies) == 1 and fetched.came_from == "labelled docs"


async def test_a_page_of_plain_hits_with_a_doc_not_held_or_past_the_window_is_fetched() -> None:
    engine = _RoundTrip()
    counted = Overview({}, asked=True, answer={"hits": {"total": {"value": 4, "relation": "eq"}}})
    ahead = PageAhead(engine, "idx", {"query": PLAIN_QUERY}, 0, 2, 4,  # type: ignore[arg-type]
                      counted, held=_held("0", "1"))
    # a method that told it nothing: the leg's count, no search
    got = await ahead.fetched(plan_page([doc_key(1), doc_key(0)], 0, 2))
    assert got is not None and got[1]["hits"]["total"]["value"] == 4 and engine.bodies == []
    assert await ahead.fetched(plan_page([doc_key(1), doc_key(5)], 0, 2)) is None
    assert await ahead.fetched(plan_page([doc_key(1)], 0, 2)) is None  # past the window
    # a body that is not plain: its page is the engine's fetch, whatever the search held
    ahead = PageAhead(engine, "idx", {"query": QUERY}, 0, 2, 4,  # type: ignore[arg-type]
                      held=_held("0", "1"))
    ahead.ask(["id-0", "id-1"])
    assert [body["size"] for body in engine.bodies] == [2, 0]
