"""Taking application queries apart: the text to refine, and the filters every round keeps."""

from __future__ import annotations

import pytest

from es_tour.errors import ConfigError
from es_tour.server._passthrough import Passthrough
from es_tour.server._request import (
    msearch_target,
    parse_msearch,
    parse_search,
)

TEXT_FIELDS = ("title", "text")
YEAR = {"range": {"year": {"gte": 2010}}}
TOPIC = {"term": {"topic": "biology"}}


def _parse(body: dict, **params: str):
    return parse_search("docs", params, body, explicit=False, text_fields=TEXT_FIELDS)


def _reason(body: dict) -> str:
    with pytest.raises(Passthrough) as verdict:
        _parse(body)
    return verdict.value.reason


def test_a_bool_gives_its_scoring_text_and_keeps_filter_and_must_not_as_filters() -> None:
    body = {"query": {"bool": {"must": [{"match": {"text": "stem cells"}}],
                               "should": [{"match_phrase": {"title": "bone marrow"}}],
                               "filter": [YEAR], "must_not": [TOPIC]}}}
    request = _parse(body)
    assert request.text == "stem cells bone marrow"
    assert request.filters == (YEAR, {"bool": {"must_not": [TOPIC]}})
    # the BM25 leg is the request's own query, filters and all
    assert request.body["query"] == body["query"] and request.lexical == body["query"]


def test_a_filter_given_as_one_object_and_a_post_filter_are_kept() -> None:
    request = _parse({"query": {"bool": {"must": {"match": {"text": "q"}}, "filter": YEAR}},
                      "post_filter": TOPIC})
    assert request.filters == (YEAR, TOPIC)


def test_required_clauses_on_fields_that_are_not_text_become_filters() -> None:
    keyword_match = {"match": {"topic": "biology"}}
    request = _parse({"query": {"bool": {"must": [{"multi_match": {"query": "q",
                                                                    "fields": ["title^2"]}},
                                                  TOPIC, keyword_match, {"match_all": {}}]}}})
    assert request.text == "q" and request.filters == (TOPIC, keyword_match)


def test_nested_bools_add_their_text_and_a_required_ones_filters() -> None:
    inner = {"bool": {"should": [{"match": {"title": "a"}}, {"combined_fields": {
        "query": "b", "fields": ["title", "text"]}}], "filter": [YEAR]}}
    request = _parse({"query": {"bool": {"must": [inner]}}})
    assert request.text == "a b" and request.filters == (YEAR,)


@pytest.mark.parametrize(("body", "reason"), [
    ({"query": {"function_score": {"query": {"match": {"text": "q"}}}}},
     "unsupported query [function_score]"),
    ({"query": {"bool": {"must": [{"match": {"text": "q"}}], "should": [TOPIC]}}},
     "optional clause [term] on a non-text field"),
    ({"query": {"bool": {"filter": [YEAR]}}}, "no query text"),
    ({"query": {"match_all": {}}}, "no query text"),
    ({"query": {"match": {"topic": "biology"}}}, "no query text"),
    ({"query": {"match": {"text": "q"}}, "sort": [{"year": "desc"}]}, "sort by a field"),
    ({"query": {"match": {"text": "q"}}, "collapse": {"field": "topic"}},
     "collapse groups hits by the engine's order"),
    ({"query": {"match": {"text": "q"}}, "rescore": {}}, "rescore reorders the engine's top hits"),
    ({"query": {"query_string": {"query": "cells +year:(2015 OR (2016))"}}},
     "query string group on [year] nested past one level"),
    ({"query": {"query_string": {"query": "cells year:2015"}}},
     "optional query string term [year:2015] on a non-text field (+year:... filters)"),
])
def test_what_no_filter_can_honour_passes_through_with_its_reason(body, reason) -> None:
    assert _reason(body) == reason


def test_sorting_by_score_is_what_the_sidecar_does() -> None:
    for sort in ("_score", ["_score"], [{"_score": "desc"}], {"_score": {"order": "desc"}}):
        assert _parse({"query": {"match": {"text": "q"}}, "sort": sort}).text == "q"


def test_the_body_and_url_parameters_are_kept_for_the_engines_own_calls() -> None:
    aggs = {"topics": {"terms": {"field": "topic"}}}
    body = {"query": {"match": {"text": "q"}}, "aggs": aggs, "highlight": {"fields": {"text": {}}},
            "explain": True, "ext": {"tour": {"k": 5}}}
    request = _parse(body, typed_keys="true", size="5", pretty="true")
    assert request.body == {key: value for key, value in body.items() if key != "ext"}
    assert request.params == {"typed_keys": "true"} and request.size == 5 and request.pretty


def test_a_query_string_runs_as_written_and_embeds_its_free_text() -> None:
    clause = {"query_string": {"query": '"stem cells" AND title:marrow~2 -mouse^2'}}
    request = _parse({"query": clause})
    assert request.text == "stem cells marrow"
    assert request.lexical == clause and request.filters == ()


def test_a_query_string_group_on_a_field_that_is_not_text_is_one_filter() -> None:
    request = _parse({"query": {"query_string": {"query": "stem cells +year:(2010 OR 2011)",
                                                 "default_operator": "or"}}})
    assert request.text == "stem cells"
    assert request.filters == ({"query_string": {"query": "year:(2010 OR 2011)",
                                                 "default_operator": "or"}},)
    grouped_text = _parse({"query": {"query_string": {"query": "title:(bone OR marrow) +year:1"}}})
    assert grouped_text.text == "bone marrow"


def test_a_dis_max_of_text_clauses_gives_their_text() -> None:
    request = _parse({"query": {"dis_max": {"queries": [{"match": {"title": "bone"}},
                                                        {"match": {"text": "marrow"}}]}}})
    assert request.text == "bone marrow"
    assert _reason({"query": {"dis_max": {"queries": [{"match": {"text": "q"}}, TOPIC]}}}) == \
        "optional clause [term] on a non-text field"


def test_required_field_terms_of_a_query_string_are_filters() -> None:
    request = _parse({"query": {"query_string": {
        "query": "cells +year:2015 -topic:genetics AND year:[2010 TO 2020]"}}})
    assert request.text == "cells"
    assert request.filters == (
        {"query_string": {"query": "year:2015"}},
        {"bool": {"must_not": [{"query_string": {"query": "topic:genetics"}}]}},
        {"query_string": {"query": "year:[2010 TO 2020]"}})
    anded = _parse({"query": {"simple_query_string": {"query": "cells year:2015",
                                                       "default_operator": "and"}}})
    assert anded.filters == ({"simple_query_string": {"query": "year:2015",
                                                      "default_operator": "and"}},)
    assert anded.lexical == {"simple_query_string": {"query": "cells year:2015",
                                                     "default_operator": "and"}}


def test_without_text_fields_every_field_is_text() -> None:
    request = parse_search("docs", {}, {"query": {"match": {"t": "q"}}}, explicit=False)
    assert request.text == "q" and request.filters == ()


def test_msearch_items_name_their_index_or_the_urls() -> None:
    assert msearch_target("POST", "/_msearch") == ""
    assert msearch_target("GET", "/docs/_msearch") == "docs"
    assert msearch_target("POST", "/docs/_search") is None
    raw = (b'{"index": "a", "preference": "x", "request_cache": true}\n{"size": 1}\n'
           b'{}\n{"query": {"match_all": {}}}\n')
    first, second = parse_msearch(raw, "docs")
    assert (first.index, first.params, first.body) == (
        "a", {"preference": "x", "request_cache": "true"}, {"size": 1})
    assert (second.index, second.header) == ("docs", {"index": "docs"})
    with pytest.raises(ConfigError, match="pairs"):
        parse_msearch(b'{}\n', "docs")
