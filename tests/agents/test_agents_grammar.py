"""The refinement grammar: parse, compile to `bool`, render — and back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from es_tour.agents import (
    WEIGHTS,
    GrammarError,
    Query,
    Refinement,
    compile_bool,
    from_bool,
    parse,
    render,
)

FIELDS = ("title", "text")

terms = st.text(st.characters(blacklist_categories=("Z", "Cc", "Cs")), min_size=1, max_size=12)
refinements = st.one_of(
    st.builds(Refinement, terms, st.sampled_from(["should", "must", "must_not"])),
    st.builds(lambda t, w: Refinement(t, "should", w), terms, st.sampled_from(WEIGHTS)),
)
queries = st.builds(
    lambda text, deltas: _apply(Query(text), deltas),
    st.text(max_size=40), st.lists(refinements, max_size=8),
)


def _apply(query: Query, deltas: list[Refinement]) -> Query:
    for delta in deltas:
        query = query.refine(delta)
    return query


@given(queries)
def test_any_refinement_sequence_round_trips_through_text_and_bool(query: Query) -> None:
    assert parse(render(query)) == query
    assert from_bool(compile_bool(query, FIELDS)) == query
    assert parse(render(from_bool(compile_bool(parse(render(query)), FIELDS)))) == query


@given(queries, refinements)
def test_refining_a_term_again_replaces_its_earlier_operator(query: Query,
                                                             delta: Refinement) -> None:
    refined = query.refine(delta)
    assert refined.refinements[-1] == delta
    assert [r.term for r in refined.refinements].count(delta.term) == 1


def test_compile_keeps_q0_as_should_and_maps_each_operator() -> None:
    query = parse("(vitamin d) cancer +bone -mice risk^4")
    compiled = compile_bool(query, FIELDS)["bool"]
    assert [c["multi_match"]["_name"] for c in compiled["should"]] == ["q0", "dq1", "dq4"]
    assert compiled["should"][0]["multi_match"]["query"] == "vitamin d"
    assert compiled["should"][2]["multi_match"]["boost"] == 4.0
    assert compiled["must"][0]["multi_match"]["query"] == "bone"
    assert compiled["must_not"][0]["multi_match"]["query"] == "mice"
    assert compiled["must"][0]["multi_match"]["fields"] == list(FIELDS)


def test_render_escapes_lucene_syntax_in_q0_and_terms() -> None:
    query = Query("a (b) c:d", (Refinement("x+y", "must"), Refinement("2.5", "should", 0.5)))
    assert render(query) == r"(a \(b\) c\:d) +x\+y 2.5^0.5"


def test_parse_without_a_group_takes_plain_words_as_q0() -> None:
    query = parse("vitamin d +cancer -mice risk^2")
    assert query.text == "vitamin d"
    assert [r.kind for r in query.refinements] == ["+", "-", "^2"]


@pytest.mark.parametrize("text", ["(q) a^3", "(q) +a^2", "(q) a^x", "(q) +", "(q"])
def test_text_outside_the_grammar_is_rejected(text: str) -> None:
    with pytest.raises(GrammarError):
        parse(text)


def test_boost_outside_the_weights_names_the_bad_value() -> None:
    with pytest.raises(GrammarError, match=r"\^3"):
        Refinement("a", "should", 3.0)


def test_a_requests_own_query_stands_for_q0_and_the_refinements_go_around_it() -> None:
    own = {"match": {"title": {"query": "stem cells", "operator": "and", "_name": "app"}}}
    query = Query("stem cells", (Refinement("marrow", "must"), Refinement("mouse", "must_not")))
    compiled = compile_bool(query, FIELDS, own)["bool"]
    assert compiled["should"] == [own]
    assert [c["multi_match"]["query"] for c in compiled["must"] + compiled["must_not"]] == \
        ["marrow", "mouse"]
    assert compile_bool(Query("stem cells"), FIELDS, own) == own  # q0 alone: as sent
