"""Application searches through the sidecar, on both engines: bool queries with filters kept in
every round of every method, query strings, aggregations, highlight, `_msearch`, pages.

The index holds SciFact docs with `synthetic_metadata` (a year and a topic), so whether a
hit satisfies a filter is read off its id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from es_tour.cluster import NodeStatus
from es_tour.datasets import FIRST_YEAR, TOPICS, YEARS, BeirDataset, synthetic_metadata
from es_tour.engines import connect
from es_tour.ingest import index_spec
from es_tour.server import PASSTHROUGH_HEADER, BackgroundServer, Models, ServerConfig
from es_tour.server._options import method_names
from integration_tests.conftest import LEARNED_POLICY, remember_scifact

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-app"
DOCS = 300
QUERY = "vitamin D deficiency and bone health"
SMALL = {"k": 5, "max_rounds": 1}  # the labeler runs on a shared CPU
# the oracle reads judgements; the learned agent runs the suite's own policy, never the
# model cache's default
EXTRA: dict[str, dict[str, Any]] = {"oracle-agent": {"qrels": {"q": {"4983": 1}},
                                                     "queries": {"q": QUERY}},
                                    "learned-agent": {"policy": LEARNED_POLICY}}
METHODS = method_names()
pytestmark = pytest.mark.usefixtures("learned_policy")
ROUNDS = {"tour-hard", "tour-soft", "rm3-agent", "learned-agent", "oracle-agent",
          "hybrid-tour", "tour-agent"}


@dataclass
class App:
    engine: str
    url: str  # the sidecar
    direct: str  # the engine


@pytest.fixture(scope="module", params=ENGINES)
async def app(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
              scifact: BeirDataset, scifact_index: str, sidecar_models: Models
              ) -> AsyncIterator[App]:
    engine, url = request.param, nodes[request.param].url
    async with connect(engine, url) as adapter:
        # BM25's top for QUERY, not match_all's first: match_all's order follows the bulk's,
        # which varies between ingests, and the page's tests need docs on the query's terms
        hits = await adapter.bool_search(scifact_index, {"match": {"text": QUERY}}, DOCS)
        spec = index_spec(INDEX, sidecar_models.encoder, metadata=True)
        await adapter.create_index(spec, replace=True)
        await adapter.bulk_index(INDEX, [{"_id": h.id, **h.source, **synthetic_metadata(h.id)}
                                         for h in hits])
        await adapter.refresh(INDEX)
    settings_body = {"index": {"tour": {"enabled": True, "method": "tour-hard", **SMALL}}}
    assert httpx.put(f"{url}/{INDEX}/_settings", json=settings_body).status_code == 200
    config = ServerConfig(upstream=url, max_k=50, deadline_ms=120_000, max_refinements=8)
    remember_scifact(sidecar_models, scifact, INDEX)
    with BackgroundServer(config, sidecar_models) as server:
        yield App(engine, server.url, url)


def _search(url: str, body: dict, **params: str) -> httpx.Response:
    return httpx.post(f"{url}/{INDEX}/_search", json=body, params=params, timeout=300)


def _msearch(url: str, items: list[tuple[dict, dict]], path: str = "/_msearch"
             ) -> httpx.Response:
    lines = "".join(json.dumps(part) + "\n" for item in items for part in item)
    return httpx.post(f"{url}{path}", content=lines.encode(), timeout=600,
                      headers={"content-type": "application/x-ndjson"})


def _refined(answer: dict) -> dict:
    assert "ext" in answer and "tour" in answer["ext"], answer
    return answer["ext"]["tour"]


def _tour(method: str) -> dict[str, Any]:
    options = {"k": SMALL["k"], **EXTRA.get(method, {})}
    if method in ROUNDS:
        options["max_rounds"] = SMALL["max_rounds"]
    return {"method": method, **options}


# A random constraint over the metadata: (its DSL, whether a doc's metadata passes it).
Constraint = tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]


@st.composite
def constraints(draw: st.DrawFn) -> list[Constraint]:
    chosen: list[Constraint] = []
    low = draw(st.integers(FIRST_YEAR, FIRST_YEAR + YEARS - 1))
    high = draw(st.integers(low, FIRST_YEAR + YEARS - 1))
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    banned = draw(st.sampled_from(TOPICS))
    pool: list[Constraint] = [
        ({"range": {"year": {"gte": low, "lte": high}}}, lambda m: low <= m["year"] <= high),
        ({"terms": {"topic": topics}}, lambda m: m["topic"] in topics),
        ({"bool": {"must_not": [{"term": {"topic": banned}}]}}, lambda m: m["topic"] != banned),
    ]
    for number in draw(st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True)):
        chosen.append(pool[number])
    return chosen


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=constraints())
def test_every_hit_of_every_method_satisfies_random_filters(app: App,
                                                            chosen: list[Constraint]) -> None:
    filters = [dsl for dsl, _ in chosen]
    query = {"bool": {"must": [{"match": {"text": QUERY}}], "filter": filters}}
    items = [({"index": INDEX}, {"query": query, "size": 10, "ext": {"tour": _tour(method)}})
             for method in METHODS]
    response = _msearch(app.url, items)
    assert response.status_code == 200, response.text
    answers = response.json()["responses"]
    assert len(answers) == len(METHODS)
    for method, answer in zip(METHODS, answers, strict=True):
        assert answer.get("status") == 200, (method, answer)
        assert _refined(answer)["method"] == method
        for hit in answer["hits"]["hits"]:
            metadata = synthetic_metadata(hit["_id"])
            assert all(passes(metadata) for _, passes in chosen), (method, hit["_id"], filters)


def test_a_filtered_bool_is_refined_and_its_filters_hold_in_every_round(app: App) -> None:
    body = {"query": {"bool": {"must": [{"match": {"text": QUERY}}],
                               "filter": [{"term": {"topic": "medicine"}}],
                               "must_not": [{"range": {"year": {"lt": 2005}}}]}}, "size": 20,
            "ext": {"tour": {"method": "hybrid-tour", "k": 5, "max_rounds": 2}}}
    answer = _search(app.url, body)
    assert answer.status_code == 200 and PASSTHROUGH_HEADER not in answer.headers
    trace = _refined(answer.json())
    seen = {doc for r in trace["rounds"] for doc in r.get("ranking", [])}
    assert seen and len(trace["rounds"]) == 3
    for doc in seen | {hit["_id"] for hit in answer.json()["hits"]["hits"]}:
        metadata = synthetic_metadata(doc)
        assert metadata["topic"] == "medicine" and metadata["year"] >= 2005, doc


def test_an_index_with_tour_on_refines_a_bool_without_asking(app: App) -> None:
    body = {"query": {"bool": {"must": [{"multi_match": {"query": QUERY,
                                                         "fields": ["title", "text"]}}],
                               "filter": [{"range": {"year": {"gte": 2010}}}]}}}
    answer = _search(app.url, body)
    assert _refined(answer.json())["method"] == "tour-hard"
    assert all(synthetic_metadata(h["_id"])["year"] >= 2010
               for h in answer.json()["hits"]["hits"])


def test_aggregations_equal_the_engines_for_the_same_body(app: App) -> None:
    body = {"query": {"bool": {"must": [{"match": {"text": QUERY}}],
                               "filter": [{"range": {"year": {"gte": 2004}}}]}},
            "aggs": {"topics": {"terms": {"field": "topic"}},
                     "years": {"histogram": {"field": "year", "interval": 5}}}}
    ours = _search(app.url, body)
    theirs = httpx.post(f"{app.direct}/{INDEX}/_search", json=body, timeout=60)
    _refined(ours.json())
    assert ours.json()["aggregations"] == theirs.json()["aggregations"]
    assert sum(b["doc_count"] for b in ours.json()["aggregations"]["topics"]["buckets"]) > 0
    typed = _search(app.url, body, typed_keys="true").json()["aggregations"]
    assert "sterms#topics" in typed and "histogram#years" in typed


def test_highlight_comes_from_the_engine_for_the_original_query(app: App) -> None:
    spec = {"fields": {"text": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]}
    body = {"query": {"match": {"text": "vitamin"}}, "highlight": spec, "size": 10}
    ours = _search(app.url, body).json()
    _refined(ours)
    ids = [hit["_id"] for hit in ours["hits"]["hits"]]
    theirs = httpx.post(f"{app.direct}/{INDEX}/_search", timeout=60, json={
        "query": {"ids": {"values": ids}}, "size": len(ids),
        "highlight": {**spec, "highlight_query": body["query"]}}).json()
    expected = {hit["_id"]: hit["highlight"] for hit in theirs["hits"]["hits"]
                if "highlight" in hit}
    assert expected, "no doc of the page mentions the query term"
    assert {hit["_id"]: hit["highlight"] for hit in ours["hits"]["hits"]
            if "highlight" in hit} == expected
    assert all("<b>" in fragment for fragments in expected.values()
               for fragment in fragments["text"])


def test_msearch_answers_in_order_in_the_engines_shape_with_errors_in_place(app: App) -> None:
    match = {"query": {"match": {"text": QUERY}}, "size": 3}
    items = [
        ({}, match),  # refined, on the URL's index
        ({"index": INDEX}, {"query": {"match_all": {}}, "size": 2}),  # passed through
        ({"index": INDEX}, {**match, "ext": {"tour": {"method": "no-such-method"}}}),  # 400
        ({"index": "it-app-missing"}, match),  # the engine's 404, in place
        ({"index": INDEX}, {"query": {"query_string": {"query": "vitamin +year:[2005 TO 2012]"}},
                            "size": 5}),  # refined, its field term a filter
    ]
    response = _msearch(app.url, items, path=f"/{INDEX}/_msearch")
    assert response.status_code == 200, response.text
    first, plain, bad, missing, query_string = response.json()["responses"]
    assert first["status"] == 200 and _refined(first)["method"] == "tour-hard"
    assert len(first["hits"]["hits"]) == 3
    assert "ext" not in plain and len(plain["hits"]["hits"]) == 2
    assert bad["status"] == 400 and "no-such-method" in bad["error"]["reason"]
    assert missing["status"] == 404 and missing["error"]["type"] == "index_not_found_exception"
    _refined(query_string)
    assert all(2005 <= synthetic_metadata(h["_id"])["year"] <= 2012
               for h in query_string["hits"]["hits"])
    reasons = response.headers[PASSTHROUGH_HEADER]
    assert "[1] no query text" in reasons and "[3]" in reasons and "[0]" not in reasons


def test_an_msearch_of_plain_searches_is_the_engines_own_answer(app: App) -> None:
    items = [({"index": INDEX}, {"query": {"match_all": {}}, "size": 2}),
             ({"index": INDEX}, {"query": {"term": {"topic": "biology"}}, "size": 1})]
    ours, theirs = _msearch(app.url, items), _msearch(app.direct, items)
    strip = [{k: v for k, v in r.items() if k != "took"} for r in theirs.json()["responses"]]
    assert [{k: v for k, v in r.items() if k != "took"}
            for r in ours.json()["responses"]] == strip
    assert ours.headers[PASSTHROUGH_HEADER] == "[0] no query text; [1] no query text"


def test_pages_of_one_query_stitch_without_duplicates_or_gaps(app: App) -> None:
    query = {"bool": {"must": [{"match": {"text": QUERY}}],
                      "filter": [{"range": {"year": {"gte": 2003}}}]}}

    def ids(start: int, size: int) -> list[str]:
        answer = _search(app.url, {"query": query, "from": start, "size": size}).json()
        return [hit["_id"] for hit in answer["hits"]["hits"]]

    whole, pages, again = ids(0, 20), ids(0, 10) + ids(10, 10), ids(0, 20)
    assert len(whole) == 20 and len(set(pages)) == len(pages)
    assert pages == whole == again


def test_a_query_string_runs_as_written_on_the_bm25_leg(app: App) -> None:
    body = {"query": {"query_string": {"query": "patient* AND (risk OR treatment)",
                                       "default_field": "text"}},
            "size": 10, "ext": {"tour": {"method": "bm25", "k": 10}}}
    ours = _search(app.url, body).json()
    theirs = httpx.post(f"{app.direct}/{INDEX}/_search", timeout=60,
                        json={"query": body["query"], "size": 10}).json()
    assert _refined(ours)["method"] == "bm25"
    assert [h["_id"] for h in ours["hits"]["hits"]] == [h["_id"] for h in theirs["hits"]["hits"]]
    assert ours["hits"]["hits"], "the query string matches no doc"


def test_what_cannot_be_honoured_passes_through_with_a_reason(app: App) -> None:
    for body, reason in (
            ({"query": {"function_score": {"query": {"match": {"text": QUERY}}}}},
             "unsupported query [function_score]"),
            ({"query": {"match": {"text": QUERY}}, "sort": [{"year": "desc"}]}, "sort by a field"),
            ({"query": {"match": {"text": QUERY}}, "collapse": {"field": "topic"}},
             "collapse groups hits by the engine's order")):
        response = _search(app.url, body)
        assert response.status_code == 200 and response.headers[PASSTHROUGH_HEADER] == reason
        assert "ext" not in response.json()
