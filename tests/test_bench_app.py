"""The application benchmark's pure parts: the workload, the filter check, the filtered
qrels, nDCG over them and how a response's refinement is read."""

from __future__ import annotations

import json
from collections import Counter

import httpx
import pytest

from es_tour.bench._app_workload import (
    MSEARCH_ITEMS,
    SHAPES,
    SIZE,
    Range,
    Term,
    filtered_qrels,
    query_string_text,
    satisfies,
    violations,
    workload,
)
from es_tour.bench.app import ndcg_at_10, send
from es_tour.datasets import synthetic_metadata
from es_tour.server import PASSTHROUGH_HEADER

QUERIES = [(f"q{i}", f"claim number {i} about (cells) AND genes: yes/no?") for i in range(300)]
QRELS = {qid: {f"d{i}": 1, f"d{i + 1000}": 1, f"d{i + 2000}": 0}
         for i, (qid, _) in enumerate(QUERIES)}
METADATA = {f"d{i}": synthetic_metadata(f"d{i}") for i in range(3000)}


def _body_filters(body: dict) -> list[dict]:
    """The non-scoring clauses of a body's bool query (filter and must_not)."""
    query = body["query"].get("bool", {})
    return [*query.get("filter", []), *query.get("must_not", [])]


def test_the_workload_is_deterministic_and_large_enough():
    first, again = workload(QUERIES, QRELS), workload(QUERIES, QRELS)
    assert first == again
    assert len(first) >= 1000
    assert len({r.id for r in first}) == len(first)
    assert workload(QUERIES[1:], QRELS) != first[:len(first) - 1]  # it depends on its input


def test_the_workload_covers_every_shape_evenly():
    counts = Counter(r.shape for r in workload(QUERIES, QRELS))
    assert set(counts) == set(SHAPES)
    singles = {shape: n for shape, n in counts.items() if shape != "pages"}
    assert max(singles.values()) - min(singles.values()) <= 1
    assert counts["pages"] == 2 * min(singles.values()) or counts["pages"] == 2 * max(
        singles.values())


def test_pages_come_in_pairs_of_one_query():
    requests = workload(QUERIES, QRELS)
    for number, request in enumerate(requests):
        if request.id.endswith("/pages/1"):
            following = requests[number + 1]
            assert following.id.endswith("/pages/2")
            first, second = request.items[0].body, following.items[0].body
            assert (first.get("from", 0), second["from"]) == (0, SIZE)
            assert first["query"] == second["query"] and first["size"] == second["size"] == SIZE


def test_every_shape_sends_what_it_names():
    by_shape = {}
    for request in workload(QUERIES, QRELS):
        by_shape.setdefault(request.shape, request)
    assert "aggs" in by_shape["aggs"].items[0].body
    assert "highlight" in by_shape["highlight"].items[0].body
    assert len(by_shape["msearch"].items) == len(MSEARCH_ITEMS) > 1
    assert "must_not" in by_shape["should-must-not"].items[0].body["query"]["bool"]
    assert "multi_match" in json.dumps(by_shape["multi-match-filter"].items[0].body)
    field = by_shape["query-string-field"].items[0]
    assert f"year:{field.filters[0].value}" in field.body["query"]["query_string"]["query"]
    assert "query_string" in by_shape["query-string"].items[0].body["query"]


def test_each_request_sends_exactly_the_filters_it_is_checked_against():
    for request in workload(QUERIES, QRELS):
        for search in request.items:
            if "query_string" in search.body["query"]:
                continue  # its filter is the year:Y term inside the query
            assert _body_filters(search.body) == [f.clause() for f in search.filters]


def test_filters_are_drawn_so_the_queries_judged_doc_passes():
    for request in workload(QUERIES, QRELS):
        anchor = synthetic_metadata(sorted(QRELS[request.query_id])[0])
        for search in request.items:
            assert satisfies(anchor, search.filters), request.id


def test_filter_satisfaction():
    doc = {"year": 2010, "topic": "biology"}
    assert satisfies(doc, [Range("year", 2008, 2010), Term("topic", "biology")])
    assert satisfies(doc, [Range("year", gte=2010), Term("topic", "genetics", negated=True)])
    assert not satisfies(doc, [Range("year", 2011)])
    assert not satisfies(doc, [Range("year", lte=2009)])
    assert not satisfies(doc, [Term("topic", "biology", negated=True)])
    assert not satisfies(doc, [Term("year", 2011)])
    assert not satisfies({"topic": "biology"}, [Range("year", 2000)])  # no year: fails
    assert not satisfies(None, [])  # a doc the index does not hold
    assert satisfies(doc, [])


def test_violations_count_the_hits_failing_the_filters():
    metadata = {"a": {"year": 2001, "topic": "biology"}, "b": {"year": 2015, "topic": "biology"},
                "c": {"year": 2015, "topic": "medicine"}}
    filters = [Range("year", gte=2010), Term("topic", "biology")]
    assert violations(["a", "b", "c", "b"], filters, metadata) == 2
    assert violations(["b", "missing"], filters, metadata) == 1
    assert violations([], filters, metadata) == 0


def test_filtered_qrels_keep_only_relevant_docs_that_pass():
    metadata = {"a": {"year": 2001, "topic": "x"}, "b": {"year": 2015, "topic": "x"},
                "c": {"year": 2016, "topic": "x"}}
    judged = {"a": 1, "b": 2, "c": 0, "gone": 1}
    assert filtered_qrels(judged, [Range("year", gte=2010)], metadata) == {"b": 2}
    assert filtered_qrels(judged, [], metadata) == {"a": 1, "b": 2}
    assert filtered_qrels(judged, [Term("topic", "y")], metadata) == {}


def test_ndcg_counts_a_query_without_a_run_as_zero():
    qrels = {"r1": {"a": 1}, "r2": {"b": 1}}
    assert ndcg_at_10({"r1": ["a", "z"], "r2": ["b"]}, qrels) == pytest.approx(1.0)
    assert ndcg_at_10({"r1": ["a"]}, qrels) == pytest.approx(0.5)
    assert ndcg_at_10({"r1": ["z", "a"], "r2": ["b"]}, qrels) < 1.0
    assert ndcg_at_10({"r1": ["a"], "other": ["a"]}, {"r1": {"a": 1}}) == pytest.approx(1.0)


def _client(handler) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))


HITS = {"hits": {"hits": [{"_id": "d1", "_source": {}}]}}


@pytest.mark.parametrize(("headers", "ext", "refined", "reason"), [
    ({}, {"ext": {"tour": {"method": "hybrid-tour"}}}, True, ""),
    ({PASSTHROUGH_HEADER: "unsupported query [bool]"}, {}, False, "unsupported query [bool]"),
    ({PASSTHROUGH_HEADER: "odd"}, {"ext": {"tour": {}}}, False, "odd"),
    ({}, {}, False, "no reason given"),
])
def test_a_search_is_refined_when_it_carries_ext_tour_without_a_passthrough_header(
        headers, ext, refined, reason):
    request = next(r for r in workload(QUERIES, QRELS) if r.shape == "bool-filter")
    seen = []

    def handler(sent: httpx.Request) -> httpx.Response:
        seen.append(sent)
        return httpx.Response(200, json={**HITS, **ext}, headers=headers)

    outcome = send(_client(handler), "http://sidecar", "idx", request)
    assert seen[0].url.path == "/idx/_search"
    assert json.loads(seen[0].content) == request.items[0].body
    assert outcome.refined == [refined] and outcome.reasons == [reason]
    assert [h["_id"] for h in outcome.hits[0]] == ["d1"] and outcome.errors == 0


def test_msearch_items_each_count_and_errors_are_items_not_refined():
    request = next(r for r in workload(QUERIES, QRELS) if r.shape == "msearch")

    def handler(sent: httpx.Request) -> httpx.Response:
        lines = sent.content.decode().splitlines()
        assert sent.url.path == "/_msearch" and len(lines) == 2 * len(request.items)
        assert json.loads(lines[0]) == {"index": "idx"}
        assert json.loads(lines[1]) == request.items[0].body
        return httpx.Response(200, json={"responses": [
            {**HITS, "ext": {"tour": {"degraded": True}}}, {**HITS},
            {"error": {"type": "x"}, "status": 400}]})

    outcome = send(_client(handler), "http://sidecar", "idx", request)
    assert outcome.refined == [True, False, False]
    assert outcome.reasons == ["", "no reason given", "error"]
    assert outcome.errors == 1 and outcome.degraded == 1


def test_query_string_text_leaves_words_only():
    assert query_string_text('a (b) AND c: "d"/e? NOT f') == "a b and c d e not f"


def test_a_warm_store_is_seeded_from_the_corpus_cache_under_the_indexs_doc_keys(
        tmp_path, monkeypatch):
    import numpy as np

    from es_tour.bench import app
    from es_tour.datasets import BeirDataset
    from es_tour.models import doc_key

    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "T", "text": "one"}) + "\n"
        + json.dumps({"_id": "d2", "title": "", "text": "two"}) + "\n")
    cached = np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32)

    class Encoder:
        def __init__(self, fresh):
            self.fresh = fresh

        def encode_docs(self, texts):
            return self.fresh[:len(texts)]

    class Member:
        def __init__(self, name, fresh):
            self.name, self.encoder, self.held = name, Encoder(fresh), {}

        def remember(self, vectors):
            self.held.update(vectors)

    monkeypatch.setattr(app, "cached_corpus_embeddings", lambda encoder, path, texts:
                        (cached, 9.0) if texts == ["T one", "two"] else None)
    good = Member("good", cached * 2)  # the same direction: the same unit vectors
    assert app.seed_from_corpus_cache([good], BeirDataset(tmp_path)) == {"good": 2}
    assert np.allclose(good.held[doc_key(app.INDEX, "d1", "T one")], [0.6, 0.8])
    bad = Member("bad", cached[::-1])
    with pytest.raises(RuntimeError, match="not what it embeds"):
        app.seed_from_corpus_cache([bad], BeirDataset(tmp_path))
