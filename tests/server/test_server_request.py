"""Reading `_search` requests: what is served, what passes through, what is a 400."""

from __future__ import annotations

import gzip
import zlib

import pytest

from es_tour.errors import BodyTooLargeError, ConfigError
from es_tour.server._passthrough import Passthrough, Reason
from es_tour.server._request import (
    MalformedJson,
    inflated,
    msearch_params,
    parse_body,
    parse_search,
    search_target,
)


def test_search_target_names_one_index_or_none() -> None:
    assert search_target("POST", "/scifact/_search") == "scifact"
    assert search_target("GET", "/_search") == ""
    assert search_target("POST", "/_all/_search") == "_all"  # read, then passed through
    assert search_target("PUT", "/scifact/_search") is None
    assert search_target("GET", "/scifact/_doc/1") is None
    assert search_target("GET", "/_cat/indices") is None


def test_search_target_decodes_the_raw_path_once_as_the_engine_does() -> None:
    assert search_target("POST", "/sci%66act/_search") == "scifact"
    # `%25` is `%`: the engine's index is `my%41idx`, not `myAidx`
    assert search_target("POST", "/my%2541idx/_search") == "my%41idx"


def test_match_text_and_paging_are_read() -> None:
    request = parse_search("docs", {"from": "2"}, {"query": {"match": {"text": {"query": "q"}}},
                                                   "size": 3}, explicit=False)
    assert (request.text, request.size, request.from_, request.vector) == ("q", 3, 2, None)


def test_es_knn_and_opensearch_knn_both_give_the_vector_and_its_field() -> None:
    es = parse_search("d", {}, {"knn": {"field": "emb", "query_vector": [1, 2], "k": 5},
                                "ext": {"tour": {"query_text": "q"}}}, explicit=True)
    os_ = parse_search("d", {}, {"query": {"knn": {"emb": {"vector": [1, 2], "k": 5}}},
                                 "ext": {"tour": {"query_text": "q"}}}, explicit=True)
    for request in (es, os_):
        assert request.vector.tolist() == [1.0, 2.0] and request.vector_field == "emb"
        assert request.text == "q" and "query_text" not in request.tour


@pytest.mark.parametrize(("target", "params", "body", "reason"), [
    ("a,b", {}, {"query": {"match": {"t": "q"}}}, "multi-index"),
    ("a*", {}, {"query": {"match": {"t": "q"}}}, "multi-index"),
    ("a", {"scroll": "1m"}, {"query": {"match": {"t": "q"}}}, "scroll"),
    ("a", {}, {"query": {"match": {"t": "q"}}, "suggest": {}},
     "suggest answers from the engine alone"),
    ("a", {}, {"query": {"bool": {}}}, "no query text"),
    ("a", {}, {"query": {"match_all": {}}}, "no query text"),
    ("a", {}, {}, "no query text"),
    ("a", {}, {"query": {"knn": {"e": {"vector": [1.0]}}}}, "no query text"),
    ("a", {}, {"query": {"match": {"t": "q"}}, "sort": ["_id"]}, "sort by a field"),
    ("a", {}, {"query": {"match": {"t": "q"}}, "stats": ["group"]},
     "unsupported body key [stats]"),
    ("a", {"q": "text:q"}, {}, "unsupported parameter [q]"),
    ("a", {"filter_path": "hits"}, {"query": {"match": {"t": "q"}}},
     "unsupported parameter [filter_path]"),
    ("a", {"terminate_after": "5"}, {"query": {"match": {"t": "q"}}},
     "terminate_after stops the engine's collection early"),
    ("a", {"routing": "r"}, {"query": {"match": {"t": "q"}}},
     "routing searches some of the index's shards, and the rounds search all"),
    ("a", {"sort": "year:desc"}, {"query": {"match": {"t": "q"}}}, "sort by a field"),
])
def test_what_cannot_be_served_passes_through_with_its_reason(target, params, body, reason) -> None:
    with pytest.raises(Passthrough) as verdict:
        parse_search(target, params, body, explicit=False)
    assert verdict.value.reason == reason


def test_malformed_json_and_bad_values_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_body(b"{nope")
    with pytest.raises(ConfigError, match="size must be an integer"):
        parse_search("a", {}, {"query": {"match": {"t": "q"}}, "size": -1}, explicit=False)
    with pytest.raises(ConfigError, match="timeout_ms"):
        parse_search("a", {}, {"query": {"match": {"t": "q"}}, "ext": {"tour": {"timeout_ms": 0}}},
                     explicit=True)
    assert parse_body(b"") == {}


def test_fetch_options_from_the_body_and_the_url_go_to_the_engine_as_sent() -> None:
    body = {"query": {"match": {"t": "q"}}, "_source": {"includes": ["a*"], "excludes": ["ab"]},
            "fields": ["year"], "docvalue_fields": ["year"], "stored_fields": ["x"],
            "script_fields": {}, "explain": True, "version": True, "seq_no_primary_term": True}
    request = parse_search("x", {"_source_includes": "t*", "from": "3", "human": "true"}, body,
                           explicit=False)
    assert request.body == body and request.params == {"_source_includes": "t*"}
    assert request.from_ == 3


def test_the_url_stored_fields_wins_over_the_body_as_the_engine_reads_it() -> None:
    request = parse_search("x", {"stored_fields": "_none_", "sort": "_score"},
                           {"query": {"match": {"t": "q"}}, "stored_fields": ["x"]},
                           explicit=False)
    assert request.body["stored_fields"] == ["_none_"] and request.params == {"sort": "_score"}


def test_msearch_url_parameters_go_to_each_search_or_pass_the_call_through() -> None:
    assert msearch_params({"typed_keys": "true", "max_concurrent_searches": "2",
                           "pretty": ""}) == {"typed_keys": "true"}
    with pytest.raises(Passthrough, match="filter_path"):
        msearch_params({"filter_path": "responses.hits"})


def test_a_passthrough_reason_is_a_safe_short_header_value() -> None:
    assert Passthrough(Reason.QUERY, kind="match_all").header() == \
        "unsupported query [match_all]"
    assert Passthrough(Reason.BODY_KEY, key="a\r\nX: é").header() == \
        "unsupported body key [a\\r\\nX: \\u00e9]"
    long = Passthrough(Reason.BODY_KEY, key="k" * 1000).header()
    assert len(long) == 200 and long.endswith("...")


def test_a_lone_surrogate_in_the_text_becomes_the_replacement_character() -> None:
    body = {"query": {"match": {"text": "vitamin \ud800 d \U0001f600"}}}
    request = parse_search("docs", {}, body, explicit=False)
    assert request.text == "vitamin \ufffd d \U0001f600"
    assert request.text.encode("utf-8")


def test_a_size_of_too_many_digits_is_named_in_the_error() -> None:
    with pytest.raises(ConfigError, match="99999999999999999999999"):
        parse_search("docs", {"size": "9" * 23}, {"query": {"match": {"t": "q"}}},
                     explicit=False)


def test_a_compressed_body_is_inflated_within_the_limit() -> None:
    raw = b'{"query": {"match": {"text": "q"}}}'
    assert inflated(gzip.compress(raw), "gzip", 1000) == raw
    assert inflated(zlib.compress(raw), "Deflate", 1000) == raw
    assert inflated(raw, None, 1000) == raw
    with pytest.raises(BodyTooLargeError, match="inflates past"):
        inflated(gzip.compress(b" " * 5000), "gzip", 1000)  # a zip bomb stops at the limit
    for body, encoding in ((raw, "gzip"), (raw, "br")):
        with pytest.raises(MalformedJson):
            inflated(body, encoding, 1000)


def test_a_field_twice_is_malformed_as_the_engines_say() -> None:
    with pytest.raises(MalformedJson, match=r"field \['query'\] twice"):
        parse_body(b'{"query": {"match_all": {}}, "size": 1, "query": {"match": {"t": "q"}}}')


def test_an_empty_query_text_is_the_engines_to_answer() -> None:
    with pytest.raises(Passthrough, match="empty query text"):
        parse_search("docs", {}, {"query": {"match": {"text": "  "}}}, explicit=False)


@pytest.mark.parametrize("query", [
    {"match": {"text": {"query": "q", "operator": "bogus"}}},
    {"match": {"text": {"query": "q", "boost": "x"}}},
    {"multi_match": {"query": "q", "type": "bogus"}},
])
def test_match_option_values_the_engine_refuses_are_a_400(query: dict) -> None:
    with pytest.raises(ConfigError):
        parse_search("docs", {}, {"query": query}, explicit=False)


def test_match_option_values_the_engine_takes_are_read() -> None:
    query = {"multi_match": {"query": "q", "type": "cross_fields", "operator": "AND",
                             "boost": 2}}
    assert parse_search("docs", {}, {"query": query}, explicit=False).text == "q"
