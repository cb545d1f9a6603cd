"""The sidecar in front of the real engines: verbatim pass-through, TOUR interception, errors.

A sidecar runs in-process on a free loopback port per engine; the official clients talk
to it exactly as they talk to the engine.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from es_tour.bench._relay import CountingRelay, Traffic
from es_tour.cluster import NodeStatus
from es_tour.engines import IndexSpec, connect
from es_tour.recommended import RECOMMENDED_METHOD, RECOMMENDED_OPTIONS
from es_tour.server import PASSTHROUGH_HEADER, BackgroundServer, Models, ServerConfig
from integration_tests.conftest import background_sidecar, sidecar_workers

ENGINES = ("opensearch", "elasticsearch")
PLAIN = "it-sidecar-plain"  # no index.tour.* settings
TOURED = "it-sidecar-tour"  # index.tour.enabled: true, method tour-soft
DOCS = 200
TOUR = {"k": 5, "max_rounds": 1}  # small: the labeler runs on a shared CPU
QUERY = "vitamin D deficiency"


@dataclass
class Sidecar:
    engine: str
    url: str  # the sidecar
    direct: str  # the engine itself
    plugin: bool  # whether the engine knows index.tour.* (our plugin is installed)

    def client(self, url: str, http_compress: bool = False) -> Any:
        if self.engine == "elasticsearch":
            from elasticsearch import Elasticsearch

            return Elasticsearch(url, request_timeout=120, http_compress=http_compress)
        from opensearchpy import OpenSearch

        return OpenSearch(url, timeout=120, http_compress=http_compress)


async def _copy_docs(engine: str, url: str) -> tuple[list[dict], bool]:
    """PLAIN and TOURED hold the same DOCS SciFact docs with their vectors."""
    async with connect(engine, url) as adapter:
        hits = await adapter.bool_search("scifact", {"match_all": {}}, DOCS)
        docs = [{"_id": h.id, **h.source} for h in hits]
        for name in (PLAIN, TOURED):
            await adapter.create_index(IndexSpec(name, dimension=384), replace=True)
            await adapter.bulk_index(name, docs)
            await adapter.refresh(name)
    settings = {"index": {"tour": {"enabled": True, "method": "tour-soft", **TOUR}}}
    response = httpx.put(f"{url}/{TOURED}/_settings", json=settings)
    return docs, response.status_code == 200


@pytest.fixture(scope="module", params=ENGINES)
async def sidecar(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                  scifact_index: str, sidecar_models: Models) -> AsyncIterator[Sidecar]:
    engine, url = request.param, nodes[request.param].url
    _, plugin = await _copy_docs(engine, url)
    # a generous deadline: these tests check answers, and the labeler shares a busy CPU
    config = ServerConfig(upstream=url, max_k=50, deadline_ms=120_000)
    with background_sidecar(config, sidecar_models, engine) as server:
        yield Sidecar(engine, server.url, url, plugin)


@pytest.fixture
def toured(sidecar: Sidecar) -> Sidecar:
    assert sidecar.plugin, (f"the {sidecar.engine} test node runs without the tour-settings "
                            "plugin; restart it (`es-tour engine stop`) so the fixture installs it")
    return sidecar


def _search(url: str, index: str, body: Any, **params: str) -> httpx.Response:
    return httpx.post(f"{url}/{index}/_search", json=body, params=params, timeout=120)


def _without_took(response: dict) -> dict:
    return {key: value for key, value in response.items() if key != "took"}


# --- pass-through -----------------------------------------------------------------------

def test_root_and_unknown_paths_answer_as_the_engine_does(sidecar: Sidecar) -> None:
    for method, path in (("GET", "/"), ("GET", "/_cluster/health"), ("GET", "/no-such-index")):
        direct = httpx.request(method, sidecar.direct + path)
        proxied = httpx.request(method, sidecar.url + path)
        assert proxied.status_code == direct.status_code
        assert proxied.headers.get("x-elastic-product") == direct.headers.get("x-elastic-product")
        if path != "/_cluster/health":
            assert proxied.json() == direct.json()


def test_official_client_round_trip_matches_direct(sidecar: Sidecar) -> None:
    name = "it-sidecar-passthrough"
    via, direct = sidecar.client(sidecar.url), sidecar.client(sidecar.direct)
    httpx.delete(f"{sidecar.direct}/{name}")
    via.indices.create(index=name, body={"mappings": {"properties": {"n": {"type": "integer"},
                                                                     "t": {"type": "text"}}}})
    assert direct.indices.exists(index=name)
    assert via.indices.exists(index=name)
    lines: list[dict] = []
    for n in range(30):
        lines += [{"index": {"_index": name, "_id": str(n)}}, {"n": n, "t": f"doc number {n}"}]
    report = via.bulk(body=lines, refresh=True)
    assert not report["errors"] and len(report["items"]) == 30

    body = {"query": {"match": {"t": "doc"}}, "sort": [{"n": "asc"}], "size": 5}
    assert _without_took(via.search(index=name, body=body)) == \
        _without_took(direct.search(index=name, body=body))
    searches = [{"index": name}, body, {"index": name}, {"query": {"term": {"n": 3}}}]
    via_m, direct_m = via.msearch(body=searches), direct.msearch(body=searches)
    assert [[h["_id"] for h in r["hits"]["hits"]] for r in via_m["responses"]] == \
        [[h["_id"] for h in r["hits"]["hits"]] for r in direct_m["responses"]]

    page = via.search(index=name, body={"sort": [{"n": "asc"}], "size": 10}, scroll="1m")
    seen = [h["_id"] for h in page["hits"]["hits"]]
    while page["hits"]["hits"]:
        page = via.scroll(scroll_id=page["_scroll_id"], scroll="1m")
        seen += [h["_id"] for h in page["hits"]["hits"]]
    via.clear_scroll(scroll_id=page["_scroll_id"])
    assert seen == [str(n) for n in range(30)]

    cat = "index,docs.count,health"
    assert via.cat.indices(index=name, h=cat, format="json") == \
        direct.cat.indices(index=name, h=cat, format="json")
    assert via.indices.get_settings(index=name) == direct.indices.get_settings(index=name)
    via.indices.delete(index=name)
    assert not direct.indices.exists(index=name)


def test_search_on_a_plain_index_is_proxied_untouched(sidecar: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "size": 3}
    proxied, direct = _search(sidecar.url, PLAIN, body), _search(sidecar.direct, PLAIN, body)
    assert proxied.status_code == 200
    assert "ext" not in proxied.json()
    assert proxied.headers[PASSTHROUGH_HEADER] == "index.tour.enabled is not true"
    assert _without_took(proxied.json()) == _without_took(direct.json())


async def test_async_client_works_through_the_sidecar(sidecar: Sidecar) -> None:
    async with connect(sidecar.engine, sidecar.url) as adapter:
        assert await adapter.count(PLAIN) == DOCS
        assert (await adapter.settings(PLAIN))["index.number_of_shards"] == "1"


# --- interception ------------------------------------------------------------------------

def _tour(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["ext"]["tour"]


def test_ext_tour_on_a_match_query_runs_tour_with_a_trace(sidecar: Sidecar) -> None:
    client = sidecar.client(sidecar.url)
    body = {"query": {"match": {"text": QUERY}}, "size": 3, "_source": ["title"],
            "ext": {"tour": {"method": "tour-hard", **TOUR}}}
    response = client.search(index=PLAIN, body=body)
    hits = response["hits"]["hits"]
    assert len(hits) == 3 and response["hits"]["total"]["relation"] == "eq"
    assert all(set(h) == {"_index", "_id", "_score", "_source"} for h in hits)
    assert all(set(h["_source"]) <= {"title"} for h in hits)
    assert response["hits"]["max_score"] == hits[0]["_score"]
    tour = response["ext"]["tour"]
    assert tour["method"] == "tour-hard" and tour["degraded"] is False
    assert tour["rounds"] and tour["rounds"][0]["round"] == 0
    assert tour["parameters"]["k"] == 5 and tour["pairs_scored"] >= 1
    assert set(tour["timings"]) == {"engine_ms", "model_ms", "own_ms", "total_ms"}


def test_query_vector_in_the_engines_own_knn_syntax_is_accepted(sidecar: Sidecar,
                                                               sidecar_models: Models) -> None:
    vector = sidecar_models.encoder.encode_queries([QUERY])[0].tolist()
    ext = {"tour": {"query_text": QUERY, **TOUR}}
    if sidecar.engine == "elasticsearch":
        body = {"knn": {"field": "embedding", "query_vector": vector, "k": 5,
                        "num_candidates": 50}, "size": 2, "ext": ext}
    else:
        body = {"query": {"knn": {"embedding": {"vector": vector, "k": 5}}}, "size": 2, "ext": ext}
    response = _search(sidecar.url, PLAIN, body)
    tour = _tour(response)
    assert len(response.json()["hits"]["hits"]) == 2 and tour["rounds"]


def test_enabled_index_is_served_with_its_settings_and_request_options_win(toured: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "size": 2}
    tour = _tour(_search(toured.url, TOURED, body))
    assert tour["method"] == "tour-soft" and tour["origins"]["method"] == "index"
    assert tour["parameters"]["k"] == 5 and tour["origins"]["k"] == "index"
    body["ext"] = {"tour": {"method": "tour-hard", "k": 4}}
    tour = _tour(_search(toured.url, TOURED, body))
    assert tour["method"] == "tour-hard" and tour["origins"]["method"] == "request"
    assert tour["parameters"]["k"] == 4 and tour["parameters"]["max_rounds"] == 1


def test_an_index_switched_to_tour_agent_takes_tours_step_as_its_action(toured: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "size": 2}
    assert _tour(_search(toured.url, TOURED, body))["method"] == "tour-soft"  # now cached
    # switched through the sidecar, the change shows on the very next search
    switch = {"index": {"tour": {"method": "tour-agent"}}}
    assert httpx.put(f"{toured.url}/{TOURED}/_settings", json=switch).status_code == 200
    try:
        tour = _tour(_search(toured.url, TOURED, body))
    finally:
        switch["index"]["tour"]["method"] = "tour-soft"
        assert httpx.put(f"{toured.url}/{TOURED}/_settings", json=switch).status_code == 200
    assert tour["method"] == "tour-agent" and tour["origins"]["method"] == "index"
    assert tour["parameters"]["k"] == 5 and tour["rounds"][0]["chosen"] == "tour-step"


@pytest.mark.parametrize("method", ["tour-soft", "hre"])
def test_an_index_budget_caps_the_pairs_a_method_labels(toured: Sidecar, method: str) -> None:
    # k=10: round 0 alone labels 10 docs (TOUR's top 10, or BM25's and kNN's), so 7 pairs
    # can only come from the budget
    chosen = {"method": method, "k": 10, "budget": 7}
    url = f"{toured.url}/{TOURED}/_settings"
    assert httpx.put(url, json={"index": {"tour": chosen}}).status_code == 200
    try:
        response = _search(toured.url, TOURED, {"query": {"match": {"text": QUERY}}, "size": 10})
    finally:
        reset = {"method": "tour-soft", "k": TOUR["k"], "budget": None}
        assert httpx.put(url, json={"index": {"tour": reset}}).status_code == 200
    tour = _tour(response)
    assert tour["method"] == method and tour["origins"]["budget"] == "index"
    assert tour["parameters"]["budget"] == 7 and tour["pairs_scored"] == 7


# The frontier's choices (docs/benchmarks/frontier.md), as index settings: rerank over
# hybrid-linear at 10 pairs; TOUR over hybrid-linear's pool at 20 and 40, here at the
# budget the index's k and max_rounds allow (2 rounds of 5)
FRONTIER_CHOICES = {
    "rerank": {"method": "rerank", "first_stage": "hybrid-linear", "bm25_weight": 0.5,
               "dense_weight": 0.1},
    "hybrid-tour": {"method": "hybrid-tour", "pool": "hybrid-linear", "lexical": "none",
                    "budget": 10, "bm25_weight": 0.3, "dense_weight": 0.0},
}
OPTION_OF_SETTING = {"first_stage": "first_stage", "pool": "pool", "lexical": "lexical",
                     "budget": "budget", "bm25_weight": "w_bm25", "dense_weight": "w_dense"}


@pytest.mark.parametrize("method", FRONTIER_CHOICES)
def test_an_index_switched_to_the_frontiers_choice_runs_it_and_fuses_its_final_scores(
        toured: Sidecar, method: str) -> None:
    chosen = FRONTIER_CHOICES[method]
    labelled = chosen.get("budget", TOUR["k"])
    body = {"query": {"match": {"text": QUERY}}, "size": labelled}
    url = f"{toured.url}/{TOURED}/_settings"
    assert httpx.put(url, json={"index": {"tour": chosen}}).status_code == 200
    try:
        response = _search(toured.url, TOURED, body)
    finally:
        reset = {key: None for key in chosen} | {"method": "tour-soft"}
        assert httpx.put(url, json={"index": {"tour": reset}}).status_code == 200
    tour = _tour(response)
    assert tour["method"] == method
    for setting, value in chosen.items():
        if setting != "method":
            option = OPTION_OF_SETTING[setting]
            assert tour["parameters"][option] == value and tour["origins"][option] == "index"
    labels = [hit["label"] for hit in tour["hits"]]
    scores = [hit["_score"] for hit in response.json()["hits"]["hits"]]
    assert len(scores) == labelled and None not in labels
    # fused scores are sums of z-scores over the labelled docs, so they add up to 0; φ's do not
    assert sum(scores) == pytest.approx(0, abs=1e-6) and sum(labels) > 1


def test_what_the_sidecar_cannot_serve_passes_through_with_a_reason(toured: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "size": 0,
            "aggs": {"all": {"filter": {"match_all": {}}}}}
    response = _search(toured.url, TOURED, body)
    assert response.status_code == 200 and response.headers[PASSTHROUGH_HEADER] == "size 0"
    assert "ext" not in response.json()
    response = _search(toured.url, TOURED, {"query": {"match_all": {}}, "size": 1})
    assert response.headers[PASSTHROUGH_HEADER] == "no query text"


def _refined_count(url: str) -> float:
    stats = httpx.get(f"{url}/_tour/stats", timeout=30).json()["es_tour"]
    return stats["refined"]["total"]


def test_the_suite_serves_on_its_workers_and_stats_sum_what_each_refined(
        sidecar: Sidecar) -> None:
    health = httpx.get(f"{sidecar.url}/_tour/health", timeout=30).json()
    workers = sidecar_workers(sidecar.engine)
    assert health["workers"] == {"serving": workers, "configured": workers}
    before = _refined_count(sidecar.url)
    body = {"query": {"match": {"text": QUERY}}, "size": 3,
            "ext": {"tour": {"method": "rerank", "k": 5}}}
    for _ in range(8):  # a connection each: under workers, each may land on either
        assert _tour(_search(sidecar.url, PLAIN, body))["method"] == "rerank"
    assert _refined_count(sidecar.url) - before == 8


def test_ext_tour_that_cannot_be_served_is_a_400_not_an_engine_error(sidecar: Sidecar) -> None:
    body = {"query": {"match": {"text": "x"}}, "sort": [{"_id": "asc"}], "ext": {"tour": {}}}
    response = _search(sidecar.url, PLAIN, body)
    assert response.status_code == 400 and "sort by a field" in response.json()["error"]["reason"]


# --- errors ------------------------------------------------------------------------------

def _engine_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["status"] == status and {"type", "reason"} <= set(payload["error"])
    return payload["error"]


@pytest.mark.parametrize(("tour", "reason"), [
    ({"bogus": 1}, "unknown tour options ['bogus']"),
    ({"method": "nope"}, "unknown tour method [nope]"),
    ({"lambda": 2.0}, "tour.lam must be a number in [0, 1]"),
    ({"k": 51}, "past this server's maximum [50]"),
])
def test_bad_ext_tour_is_a_400_in_the_engines_error_shape(sidecar: Sidecar, tour: dict,
                                                          reason: str) -> None:
    body = {"query": {"match": {"text": "x"}}, "ext": {"tour": tour}}
    error = _engine_error(_search(sidecar.url, PLAIN, body), 400)
    assert error["type"] == "illegal_argument_exception" and reason in error["reason"]


@pytest.mark.parametrize("method", ["tour-hard", "bm25"])
def test_a_search_timeout_in_the_url_is_the_engines_not_the_sidecars(sidecar: Sidecar,
                                                                     method: str) -> None:
    # `timeout` is the engine's search timeout: never the sidecar's own client's
    options = TOUR if method == "tour-hard" else {}
    body = {"query": {"match": {"text": QUERY}}, "size": 3,
            "ext": {"tour": {"method": method, **options}}}
    direct = _search(sidecar.direct, PLAIN, {"query": body["query"], "size": 3},
                     timeout="1nanos")
    refined = _search(sidecar.url, PLAIN, body, timeout="1nanos")
    assert direct.status_code == 200
    assert refined.status_code == 200, refined.text
    assert refined.json()["ext"]["tour"]["method"] == method


def test_vector_of_the_wrong_dimension_is_a_400(sidecar: Sidecar) -> None:
    body = {"query": {"knn": {"embedding": {"vector": [0.1] * 7, "k": 5}}},
            "ext": {"tour": {"query_text": "x"}}}
    error = _engine_error(_search(sidecar.url, PLAIN, body), 400)
    assert "7 dimensions" in error["reason"] and "384" in error["reason"]


def test_malformed_json_is_a_400(sidecar: Sidecar, toured: Sidecar) -> None:
    for index in (PLAIN, TOURED):  # the engine's own 400, then the sidecar's
        response = httpx.post(f"{sidecar.url}/{index}/_search", content=b"{not json",
                              headers={"content-type": "application/json"})
        _engine_error(response, 400)


def test_a_client_that_compresses_its_bodies_gets_tour_and_pass_through(toured: Sidecar) -> None:
    client = toured.client(toured.url, http_compress=True)  # gzip request bodies
    body = {"query": {"match": {"text": QUERY}}, "size": 3}
    served = client.search(index=TOURED, body=body)
    assert served["ext"]["tour"]["method"] == "tour-soft" and served["hits"]["hits"]
    proxied = client.search(index=PLAIN, body=body)
    assert "ext" not in proxied and proxied["hits"]["hits"]


def test_raw_query_string_characters_are_the_engines_to_judge(sidecar: Sidecar) -> None:
    query = '/_search?size=0&q=title:[a TO m]"x"'.replace(" ", "%20")
    via, direct = (httpx.get(url + f"/{PLAIN}" + query, timeout=60)
                   for url in (sidecar.url, sidecar.direct))
    assert via.status_code == direct.status_code, (via.text, direct.text)


def test_a_body_key_with_control_characters_passes_through_with_a_safe_reason(
        toured: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "a\r\nX-Injected: yes": 1}
    via, direct = (_search(url, TOURED, body) for url in (toured.url, toured.direct))
    assert via.status_code == direct.status_code == 400, via.text
    assert "x-injected" not in via.headers
    assert via.headers[PASSTHROUGH_HEADER] == "unsupported body key [a\\r\\nX-Injected: yes]"


def test_a_lone_surrogate_in_the_query_text_is_searched_as_the_engine_reads_it(
        toured: Sidecar) -> None:
    raw = b'{"query": {"match": {"text": "vitamin \\ud800 deficiency"}}, "size": 3}'
    response = httpx.post(f"{toured.url}/{TOURED}/_search", content=raw, timeout=120,
                          headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["ext"]["tour"]["method"] == "tour-soft"
    assert response.json()["hits"]["hits"]


def test_a_doc_without_a_stored_vector_is_a_400_that_names_it(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """Through a sidecar of its own: meeting the doc, the script that gives BM25 hits their
    q·c leaves the index for that sidecar's later searches, which the module's others share."""
    doc = f"{sidecar.direct}/{PLAIN}/_doc/no-vector?refresh=true"
    created = httpx.put(doc, json={"title": "Vitamin D deficiency", "text": QUERY * 20})
    assert created.status_code in (200, 201), created.text
    config = ServerConfig(upstream=sidecar.direct, max_k=50, deadline_ms=120_000, workers=1)
    try:
        body = {"query": {"match": {"text": QUERY}}, "size": 3,
                "ext": {"tour": {"method": "vector-rerank", "k": 10}}}
        with BackgroundServer(config, sidecar_models) as server:
            error = _engine_error(_search(server.url, PLAIN, body), 400)
        assert "[no-vector]" in error["reason"] and "[embedding]" in error["reason"]
    finally:
        httpx.delete(doc)


def test_an_agent_on_an_alias_over_two_indices_is_answered(sidecar: Sidecar) -> None:
    """Docs are read by id with a search, which an alias over several indices answers (an
    `_mget` there was the engine's 400): the hits name their concrete indices."""
    alias = "it-sidecar-both"
    actions = [{"add": {"index": index, "alias": alias}} for index in (PLAIN, TOURED)]
    assert httpx.post(f"{sidecar.direct}/_aliases", json={"actions": actions}).status_code == 200
    try:
        body = {"query": {"match": {"text": QUERY}}, "size": 10,
                "ext": {"tour": {"method": "hre", "k": 5}}}
        answer = _search(sidecar.url, alias, body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["ext"]["tour"]["method"] == "hre"
        named = {hit["_index"] for hit in answer.json()["hits"]["hits"]}
        assert named and named <= {PLAIN, TOURED}
    finally:
        remove = [{"remove": action["add"]} for action in actions]
        httpx.post(f"{sidecar.direct}/_aliases", json={"actions": remove})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_upstream_down_is_a_quick_502(sidecar_models: Models) -> None:
    config = ServerConfig(upstream=f"http://127.0.0.1:{_closed_port()}", connect_timeout_s=1.0)
    with background_sidecar(config, sidecar_models) as server:
        for request in (httpx.Request("GET", f"{server.url}/"),
                        httpx.Request("POST", f"{server.url}/any/_search",
                                      json={"query": {"match": {"t": "x"}}, "ext": {"tour": {}}})):
            started = time.monotonic()
            response = httpx.Client(timeout=30).send(request)
            assert time.monotonic() - started < 5
            assert _engine_error(response, 502)["type"] == "upstream_exception"


def test_past_the_deadline_round_0_results_come_back_degraded(sidecar: Sidecar) -> None:
    body = {"query": {"match": {"text": QUERY}}, "size": 3,
            "ext": {"tour": {"timeout_ms": 1, "method": "tour-hard", **TOUR}}}
    response = _search(sidecar.url, PLAIN, body)
    tour = _tour(response)
    assert tour["degraded"] is True and tour["fallback"] == "knn"
    assert tour["method"] == "tour-hard"
    assert len(response.json()["hits"]["hits"]) == 3


@pytest.mark.parametrize("method", ["hybrid-linear", "hybrid-tour"])
def test_a_hybrid_pools_legs_bring_each_others_scores(sidecar: Sidecar, method: str) -> None:
    """A hybrid pool ranks BM25 ∪ kNN by both scores. Each leg brings the other's score of
    its hits, the BM25 leg's q·c by the es-tour plugin's script (on Elasticsearch, whose
    painless gives none, the only way), so the first round asks its two searches and nothing
    more (integration_tests/test_engines.py checks the scores)."""
    options = {"pool": "hybrid-linear", "lexical": "none"} if method == "hybrid-tour" else {}
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False,
            "ext": {"tour": {"method": method, **options}}}
    tour = _tour(_search(sidecar.url, PLAIN, body))
    # hybrid-linear is one round: its searches are the method's
    first = tour["rounds"][0]["engine_calls"] if method == "hybrid-tour" else tour["engine_calls"]
    assert first == 2


@pytest.mark.parametrize("tour", [
    {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS},
    {"method": "tour-soft", **TOUR, "bm25_weight": 0.3}], ids=["recommended", "fused tour"])
def test_a_refined_page_comes_in_its_last_rounds_round_trip(
        sidecar: Sidecar, sidecar_models: Models, tour: dict[str, Any]) -> None:
    """A refinement's last round fetches the text it labels and, in the same `_msearch`,
    the page's candidates (every doc it labelled, with the request's body) and the
    overview, and a TOUR search the BM25 its fusion weighs: a refined search is 4 round
    trips on either engine, where a page fetched after the ranking makes 5 (a fused TOUR
    search's made 6). Counted on the wire between a sidecar and the engine; the page's hits
    are the engine's own fetch of the docs es-tour ranked (with their `_version`, which
    the engine's fetch adds: not a page of plain hits)."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False,
            "version": True, "ext": {"tour": tour}}
    relay = CountingRelay(sidecar.direct)
    with relay as relayed:
        # one worker, which reads the settings and the vector field once; no vector store,
        # whose reads and writes are the sidecar's own, at times of its own; no doc cache,
        # which would spare the second search its text fetches
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, doc_cache_mib=0,
                              ranking_cache_ttl_s=0)
        with BackgroundServer(config, sidecar_models) as server:
            _search(server.url, PLAIN, body)
            relay.reset()
            response = _search(server.url, PLAIN, body)
            traffic = relay.reset()
    assert traffic.requests == 4, traffic.calls
    page = [hit["_id"] for hit in response.json()["hits"]["hits"]]
    assert page == [hit["_id"] for hit in _tour(response)["hits"]][:10]
    fetched = {hit["_id"]: hit for hit in _search(sidecar.direct, PLAIN, {
        "query": {"bool": {"filter": [{"ids": {"values": page}}], "should": [body["query"]]}},
        "_source": False, "version": True, "size": 10}).json()["hits"]["hits"]}
    # each hit as the engine fetched it, its `_score` es-tour's
    assert ([{**hit, "_score": None} for hit in response.json()["hits"]["hits"]]
            == [{**fetched[doc], "_score": None} for doc in page])


def _searches_run(url: str) -> int:
    """The query phases the engine has run, over every index (each search of an `_msearch`
    one, on these one-shard indices)."""
    stats = httpx.get(f"{url}/_stats/search").json()
    return stats["_all"]["total"]["search"]["query_total"]


_COUNTING_METHODS = {"recommended": {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS},
                     "hybrid-linear": {"method": "hybrid-linear"},
                     "rerank of bm25": {"method": "rerank", "first_stage": "bm25", "k": 10}}


def _searches_each_ran(sidecar: Sidecar, models: Models,
                       searches: Mapping[str, tuple[dict[str, Any], dict[str, str]]]
                       ) -> tuple[dict[str, int], dict[str, Any]]:
    """Each of `searches` (a body and URL parameters, by name) sent through one fresh
    one-worker sidecar, after a first that reads the index's vector field: how many searches
    the engine ran for each, and its answer. No vector store and no doc cache, whose reads
    would vary between them."""
    config = ServerConfig(upstream=sidecar.direct, max_k=50, deadline_ms=120_000, workers=1,
                          vector_store=False, doc_cache_mib=0, ranking_cache_ttl_s=0)
    ran, answers = {}, {}
    with BackgroundServer(config, models) as server:
        _search(server.url, PLAIN, next(iter(searches.values()))[0])
        for how, (body, params) in searches.items():
            before = _searches_run(sidecar.direct)
            answers[how] = _search(server.url, PLAIN, body, **params).json()
            ran[how] = _searches_run(sidecar.direct) - before
    return ran, answers


@pytest.mark.parametrize(("method", "track_total_hits"), [
    ("recommended", None), ("recommended", True), ("recommended", 7), ("recommended", False),
    ("hybrid-linear", None), ("rerank of bm25", None)])
def test_round_0s_lexical_leg_counts_the_total_one_search_fewer(
        sidecar: Sidecar, sidecar_models: Models, method: str,
        track_total_hits: bool | int | None) -> None:
    """A refined search whose lexical leg runs the request's own query counts the request's
    total in that leg: one search fewer than the same request with a URL parameter, whose
    total comes from a size-0 search of its own (and, for a method that labels, whose page
    a URL parameter may change: the engine fetches it, where the labelled docs make the
    other's page). Either way the total is the engine's."""
    body: dict[str, Any] = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False}
    if track_total_hits is not None:
        body["track_total_hits"] = track_total_hits
    refined = {**body, "ext": {"tour": _COUNTING_METHODS[method]}}
    engine_answer = _search(sidecar.direct, PLAIN, body).json()
    ran, answers = _searches_each_ran(sidecar, sidecar_models, {
        "counted by the leg": (refined, {}), "apart": (refined, {"request_cache": "true"})})
    labels = answers["counted by the leg"]["ext"]["tour"]["pairs_scored"] > 0
    assert ran["counted by the leg"] == ran["apart"] - 1 - labels, ran
    for answer in answers.values():
        assert answer["hits"].get("total") == engine_answer["hits"].get("total")
        assert len(answer["hits"]["hits"]) == 10


def test_a_last_round_reads_its_text_from_a_page_of_whole_sources_one_search_fewer(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """A request that filters no `_source` has its page, fetched in the last round's round
    trip, bring the text that round labels: one search fewer than the same request
    filtering `_source`, whose text needs a fetch of its own. Same labels, so the same
    ranking; the hits are the engine's, with no `_seq_no` the request did not ask for.
    (`version: false` changes no hit, but makes the page the engine's fetch: not plain.)"""
    refined = {"query": {"match": {"text": QUERY}}, "size": 10, "version": False,
               "ext": {"tour": _COUNTING_METHODS["recommended"]}}
    ran, answers = _searches_each_ran(sidecar, sidecar_models, {
        "whole": (refined, {}), "filtered": ({**refined, "_source": ["title", "text"]}, {})})
    assert ran["whole"] == ran["filtered"] - 1, ran
    hits = answers["whole"]["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == [
        hit["_id"] for hit in answers["filtered"]["hits"]["hits"]]
    ids = [hit["_id"] for hit in hits]
    engine_hits = _search(sidecar.direct, PLAIN, {"query": {"ids": {"values": ids}},
                                                  "size": len(ids)}).json()["hits"]["hits"]
    sources = {hit["_id"]: hit["_source"] for hit in engine_hits}
    assert len(hits) == 10
    for hit in hits:
        assert hit["_source"] == sources[hit["_id"]]
        assert "_seq_no" not in hit and "_primary_term" not in hit


@pytest.mark.parametrize("source", [True, False])
def test_a_page_of_plain_hits_is_the_docs_the_search_fetched_to_label(
        sidecar: Sidecar, sidecar_models: Models, source: bool) -> None:
    """A request whose hits show nothing the engine computes for its query (no fetch
    option, sort or named query), its `_source` whole or none, has its page answered from
    the docs the search fetched to label, as this caller's fetches read them: no page
    search. Against the same request with `version: false`, which changes no hit but makes
    the engine fetch the page: the same hits, each as the engine's own fetch gives it; no
    source spares the page's search, whole sources the page's sources on the wire (every
    doc labelled, where the last round fetches only the text it labels)."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": source,
            "ext": {"tour": _COUNTING_METHODS["recommended"]}}
    bodies = {"plain": body, "fetched": {**body, "version": False}}
    relay = CountingRelay(sidecar.direct)
    ran, answers, traffic = {}, {}, {}
    with relay as relayed:
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, doc_cache_mib=0,
                              ranking_cache_ttl_s=0)
        with BackgroundServer(config, sidecar_models) as server:
            _search(server.url, PLAIN, body)  # the sidecar reads the index's vector field once
            for how, sent in bodies.items():
                before, _ = _searches_run(sidecar.direct), relay.reset()
                answers[how] = _search(server.url, PLAIN, sent).json()
                ran[how], traffic[how] = _searches_run(sidecar.direct) - before, relay.reset()
    hits = answers["plain"]["hits"]["hits"]
    ids = [hit["_id"] for hit in hits]
    assert len(hits) == 10 and hits == answers["fetched"]["hits"]["hits"]
    assert [answers[how]["ext"]["tour"]["page"] for how in bodies] == ["labelled docs", "engine"]
    engine_hits = {hit["_id"]: hit for hit in _search(sidecar.direct, PLAIN, {
        "query": {"bool": {"filter": [{"ids": {"values": ids}}], "should": [body["query"]]}},
        "_source": source, "size": 10}).json()["hits"]["hits"]}
    assert [{**hit, "_score": None} for hit in hits] == [
        {**engine_hits[doc], "_score": None} for doc in ids]
    if source:
        assert ran["plain"] == ran["fetched"], ran
        smallest = min(len(json.dumps(hit["_source"])) for hit in engine_hits.values())
        spared = traffic["fetched"].bytes_received - traffic["plain"].bytes_received
        assert spared > 5 * smallest, (spared, smallest)
    else:
        assert ran["plain"] == ran["fetched"] - 1, ran


def test_a_page_of_docs_a_leg_named_by_doc_key_names_them_no_search_of_their_ids_first(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """A kNN leg names its hits by doc key (no stored field loaded): the page asks for them
    by it and learns their `_id`s from its own hits, so a refined kNN search runs its kNN,
    its page and its total, and no search that only reads `_id`s. The hits are the engine's,
    with no `_seq_no` the request did not ask for, and the trace names docs by `_id`."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": ["title"],
            "ext": {"tour": {"method": "knn", "k": 10}}}
    ran, answers = _searches_each_ran(sidecar, sidecar_models, {"knn": (body, {})})
    assert ran["knn"] == 3, ran
    hits = answers["knn"]["hits"]["hits"]
    ids = [hit["_id"] for hit in hits]
    engine_hits = _search(sidecar.direct, PLAIN, {"query": {"ids": {"values": ids}},
                                                  "size": len(ids), "_source": ["title"]}
                          ).json()["hits"]["hits"]
    sources = {hit["_id"]: hit["_source"] for hit in engine_hits}
    assert len(hits) == 10 and set(ids) == set(sources)
    for hit in hits:
        assert hit["_source"] == sources[hit["_id"]]
        assert "_seq_no" not in hit and "_primary_term" not in hit
    traced = answers["knn"]["ext"]["tour"]
    assert [hit["_id"] for hit in traced["hits"]] == ids
    assert traced["rounds"][0]["ranking"][:10] == ids


def test_a_fused_rerank_of_both_legs_reads_its_pools_bm25_from_the_legs(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """rerank-hybrid's kNN leg brings each hit's BM25 (each leg the other's score), so a
    final-score fusion that weighs BM25 asks the engine no search of the pool's BM25: the
    legs and the text it labels (which makes its page of plain hits), as with no BM25
    weight. The fused order still differs from φ's alone."""
    method = {"method": "rerank-hybrid", "k": 20, "w_dense": 0.0}
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False}
    ran, answers = _searches_each_ran(sidecar, sidecar_models, {
        "by phi": ({**body, "ext": {"tour": {**method, "w_bm25": 0.0}}}, {}),
        "fused": ({**body, "ext": {"tour": {**method, "w_bm25": 1.0}}}, {})})
    assert ran["fused"] == ran["by phi"] == 3, ran
    ranked = {how: [hit["_id"] for hit in answer["hits"]["hits"]]
              for how, answer in answers.items()}
    assert ranked["fused"] != ranked["by phi"]


def test_a_text_fetch_asks_whole_sources_as_the_engine_stores_them(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """rerank takes no TOUR step, yet the text it fetches to label comes as whole sources,
    the vector field's floats included: the engine sends a stored source as it is, where a
    filter leaving the vector out would make it parse and write every source again, at more
    engine CPU than the bytes cost (docs/benchmarks/load.md). Counted on the wire: the
    search brings at least the labelled docs' vectors."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False,
            "ext": {"tour": {"method": "rerank", "first_stage": "bm25", "k": 10}}}
    relay = CountingRelay(sidecar.direct)
    with relay as relayed:
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, doc_cache_mib=0,
                              ranking_cache_ttl_s=0)
        with BackgroundServer(config, sidecar_models) as server:
            _search(server.url, PLAIN, body)  # the sidecar reads the index's vector field once
            relay.reset()
            answer = _search(server.url, PLAIN, body).json()
            traffic = relay.reset()
    labelled = [hit["_id"] for hit in answer["ext"]["tour"]["hits"]]
    assert len(labelled) == 10
    docs = _search(sidecar.direct, PLAIN, {"query": {"ids": {"values": labelled}},
                                           "size": 10}).json()["hits"]["hits"]
    vector_bytes = sum(len(json.dumps(doc["_source"]["embedding"])) for doc in docs)
    assert traffic.bytes_received >= vector_bytes, (traffic.bytes_received, vector_bytes)


def _counted_search(relay: CountingRelay, url: str, body: dict[str, Any], caller: str
                    ) -> tuple[Traffic, dict[str, Any]]:
    """`body` searched through the sidecar at `url` as `caller`, and the engine traffic it
    made. The engines run without security: they ignore the credentials, which tell the
    sidecar's callers apart."""
    relay.reset()
    answer = httpx.post(f"{url}/{PLAIN}/_search", json=body, timeout=120,
                        auth=(caller, caller))
    answer.raise_for_status()
    return relay.reset(), answer.json()


def test_the_doc_cache_spares_a_caller_the_text_fetch_of_docs_it_was_shown(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """A search whose labelled docs its caller's earlier search fetched asks the engine two
    round trips less (each round's text fetch), for a fraction of the bytes, and answers
    the same; another caller, or
    a doc written again (a new `_seq_no`), is fetched anew. Counted on the wire, with no
    read-ahead (its searches would cross the counts)."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False,
            "ext": {"tour": {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS}}}
    relay = CountingRelay(sidecar.direct)
    with relay as relayed:
        # the same search again: no ranking kept, so that it runs its rounds again
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, doc_cache_preload_docs=0,
                              ranking_cache_ttl_s=0)
        with BackgroundServer(config, sidecar_models) as server:
            def counted(caller: str) -> tuple[Traffic, dict]:
                return _counted_search(relay, server.url, body, caller)

            counted("first")  # the sidecar reads the index's vector field once
            cold, first = counted("app")
            warm, second = counted("app")
            other, _ = counted("other")
            # the top labelled doc written again, as it was: a new version of it
            doc = second["hits"]["hits"][0]["_id"]
            source = httpx.get(f"{sidecar.direct}/{PLAIN}/_doc/{doc}").json()["_source"]
            httpx.put(f"{sidecar.direct}/{PLAIN}/_doc/{doc}", json=source,
                      params={"refresh": "true"}).raise_for_status()
            rewritten, third = counted("app")
            stats = httpx.get(f"{server.url}/_tour/stats").json()["es_tour"]

    # the warm search's 20 docs at least, ops read how often docs came from the cache
    assert stats["doc_cache_hits"]["total"] >= 20 and stats["doc_cache"]["hit_rate"] > 0

    def searches(traffic: Traffic) -> int:  # less each caller's first settings read
        return sum(n for call, n in traffic.calls.items() if call.startswith("POST"))

    # both rounds' text fetches spared, the page of plain hits coming from the kept docs
    assert searches(warm) == searches(cold) - 2, (cold.calls, warm.calls)
    assert warm.bytes_received < cold.bytes_received / 2
    assert searches(other) == searches(cold)  # another caller's own fetches
    assert other.bytes_received > 2 * warm.bytes_received
    # the doc's new version is fetched, its source and all (its vector where a step reads it)
    text = {key: value for key, value in source.items() if key != "embedding"}
    assert rewritten.bytes_received - warm.bytes_received > len(json.dumps(text)) / 2
    # each doc labelled as the fetched text labelled it. BM25's statistics may move between
    # searches (the engine merging away docs earlier tests deleted, the doc written here),
    # which may swap two docs of close scores or change a labelled doc or two
    labels = {h["_id"]: h["label"] for h in first["ext"]["tour"]["hits"]
              if h["label"] is not None}
    for answer in (second, third):
        again = {h["_id"]: h["label"] for h in answer["ext"]["tour"]["hits"]
                 if h["label"] is not None}
        assert len(labels.keys() & again.keys()) >= 8  # of the page's 10
        assert all(again[doc] == labels[doc] for doc in labels.keys() & again.keys())


def test_a_later_page_is_cut_from_the_ranking_its_callers_same_search_made(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """A caller's next page of a refined search runs no round again: one round trip (the
    page and its total), the same hits and total as a full refinement gives, no pair
    labelled. Another caller's same search is refined for it; a doc deleted since the
    ranking was made makes the sidecar refine the search again rather than show a short
    page. Counted on the wire."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": ["title"],
            "ext": {"tour": {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS}}}
    relay = CountingRelay(sidecar.direct)
    with relay as relayed:
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, doc_cache_preload_docs=0)
        with BackgroundServer(config, sidecar_models) as server:
            def counted(caller: str, start: int) -> tuple[Traffic, dict]:
                return _counted_search(relay, server.url, {**body, "from": start}, caller)

            _, third_elsewhere = counted("other", 20)
            first_traffic, _ = counted("app", 0)
            reused_traffic, second = counted("app", 10)
            _, second_elsewhere = counted("another", 10)
            gone = third_elsewhere["hits"]["hits"][0]["_id"]
            source = httpx.get(f"{sidecar.direct}/{PLAIN}/_doc/{gone}").json()["_source"]
            httpx.delete(f"{sidecar.direct}/{PLAIN}/_doc/{gone}",
                         params={"refresh": "true"}).raise_for_status()
            try:
                _, third = counted("app", 20)
            finally:
                httpx.put(f"{sidecar.direct}/{PLAIN}/_doc/{gone}", json=source,
                          params={"refresh": "true"}).raise_for_status()
            again_traffic, third_again = counted("app", 20)
            stats = httpx.get(f"{server.url}/_tour/stats").json()["es_tour"]

    def searches(traffic: Traffic) -> dict[str, int]:
        return {call: n for call, n in traffic.calls.items() if call.startswith("POST")}

    assert sum(searches(first_traffic).values()) >= 2
    assert searches(reused_traffic) == {"POST /_msearch": 1}, reused_traffic.calls
    tour = second["ext"]["tour"]
    assert tour["ranking_reused"] is True and tour["pairs_scored"] == 0
    assert second_elsewhere["ext"]["tour"]["ranking_reused"] is False
    assert second_elsewhere["ext"]["tour"]["pairs_scored"] > 0
    assert second["hits"]["total"] == second_elsewhere["hits"]["total"]
    assert [hit["_id"] for hit in second["hits"]["hits"]] == [
        hit["_id"] for hit in second_elsewhere["hits"]["hits"]]
    assert all("title" in hit["_source"] for hit in second["hits"]["hits"])
    # the deleted doc: that page refined again, ten hits without it
    assert third["ext"]["tour"]["ranking_reused"] is False
    assert len(third["hits"]["hits"]) == 10
    assert gone not in {hit["_id"] for hit in third["hits"]["hits"]}
    assert third_again["ext"]["tour"]["ranking_reused"] is True
    assert searches(again_traffic) == {"POST /_msearch": 1}
    assert stats["rankings_reused"]["total"] == 2
    # one ranking per caller's search, whatever its pages; ops read what they hold
    assert stats["rankings_kept"] == 3 and stats["rankings_kept_bytes"] > 0


def test_a_later_page_on_a_new_connection_reaches_its_ranking_on_any_worker(
        sidecar: Sidecar) -> None:
    """The suite's sidecar (several workers in front of OpenSearch, one in front of
    Elasticsearch), each page sent on a connection of its own, as a client without a pool
    sends it: the kernel hands each to any worker, and every later page is cut from the
    ranking its first page made (the workers share what they keep)."""
    texts = ["vitamin d deficiency and bone fractures", "statins and muscle pain",
             "gut microbiota in obesity", "sleep loss and memory"]
    reused = []
    for text in texts:
        body = {"query": {"match": {"text": text}}, "size": 5, "_source": False,
                "ext": {"tour": {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS}}}
        for start in (0, 5, 10):
            with httpx.Client(timeout=120, auth=("pager", "pager")) as fresh:
                answer = fresh.post(f"{sidecar.url}/{PLAIN}/_search",
                                    json={**body, "from": start})
            answer.raise_for_status()
            reused.append(answer.json()["ext"]["tour"]["ranking_reused"])
    assert reused == [False, True, True] * len(texts), (sidecar_workers(sidecar.engine),
                                                         reused)


@pytest.mark.parametrize("method", ["hybrid-linear", "hybrid-tour"])
def test_the_page_and_each_rounds_top_10_name_docs_by_id(sidecar: Sidecar, method: str) -> None:
    """Pool legs name docs by `_seq_no` key; everything a caller reads of them is by `_id`:
    the page (the engine's own hits), `ext.tour.hits` and each round's top 10. Docs below
    that no search fetched may stay keys; they are the same docs the engine's ids give."""
    body = {"query": {"match": {"text": QUERY}}, "size": 10, "_source": False,
            "ext": {"tour": {"method": method}}}
    response = _search(sidecar.url, PLAIN, body)
    tour = _tour(response)
    page = [hit["_id"] for hit in response.json()["hits"]["hits"]]
    plain = _search(sidecar.direct, PLAIN, {"query": {"match_all": {}}, "size": 1000,
                                                "_source": False}).json()
    ids = {hit["_id"] for hit in plain["hits"]["hits"]}
    assert len(page) == 10 and set(page) <= ids
    assert [hit["_id"] for hit in tour["hits"]] == page
    for trace in tour["rounds"]:
        assert trace["ranking"] and set(trace["ranking"][:10]) <= ids


def test_a_callers_docs_read_ahead_spare_every_text_fetch_of_its_later_searches(
        sidecar: Sidecar, sidecar_models: Models) -> None:
    """After a caller's first refined search, the sidecar reads that caller's docs of the
    index ahead: a later search of other words, whose labelled docs no search fetched
    before, then asks the engine its legs alone (each round's text fetch spared, the page
    of plain hits from the docs read), and answers as a caller fetching them does.
    Counted on the wire."""
    body = {"size": 10, "_source": False,
            "ext": {"tour": {"method": RECOMMENDED_METHOD, **RECOMMENDED_OPTIONS}}}
    relay = CountingRelay(sidecar.direct)
    with relay as relayed:
        config = ServerConfig(upstream=relayed, max_k=50, deadline_ms=120_000, workers=1,
                              vector_store=False, ranking_cache_ttl_s=0)
        with BackgroundServer(config, sidecar_models) as server:
            def counted(caller: str, query: str) -> tuple[Traffic, dict]:
                return _counted_search(relay, server.url,
                                       {**body, "query": {"match": {"text": query}}}, caller)

            def read_ahead() -> float:
                stats = httpx.get(f"{server.url}/_tour/stats").json()["es_tour"]
                return float(stats["doc_cache_read_ahead"]["total"])

            def read_until(docs: int) -> float:
                deadline = time.monotonic() + 60
                while read_ahead() < docs and time.monotonic() < deadline:
                    time.sleep(0.2)
                return read_ahead()

            count = httpx.get(f"{sidecar.direct}/{PLAIN}/_count").json()["count"]
            counted("first", QUERY)  # the sidecar reads the index's vector field once
            first_read = read_until(count)  # one read at a time: then app's
            cold, _ = counted("app", QUERY)
            both_read = read_until(2 * count)
            warm, mine = counted("app", "insulin resistance in obese mice")
            fetching, theirs = counted("fresh", "insulin resistance in obese mice")

    assert (first_read, both_read) == (count, 2 * count)  # each caller's every doc, once

    def searches(traffic: Traffic) -> int:
        return sum(n for call, n in traffic.calls.items() if call.startswith("POST"))

    # each round's legs in one `_msearch`, and nothing else
    assert {call for call in warm.calls if call.startswith("POST")} == {"POST /_msearch"}
    assert searches(warm) <= searches(cold) - 2, (cold.calls, warm.calls)
    assert searches(fetching) >= searches(warm) + 2  # a caller not read ahead yet fetches
    assert warm.bytes_received < fetching.bytes_received / 2
    assert mine["hits"] == theirs["hits"]
    labels = {h["_id"]: h["label"] for h in theirs["ext"]["tour"]["hits"]}
    assert {h["_id"]: h["label"] for h in mine["ext"]["tour"]["hits"]} == labels
