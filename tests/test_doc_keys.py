"""Doc keys: how a pool leg's `_seq_no` names become `_id`s before anyone sees them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from es_tour.engines import Hit, first_of_each, ids_query, key_seq_no
from es_tour.pipeline import RankedHit, SearchResult, Timings, TourRound, with_doc_ids


def test_a_doc_key_is_read_back_and_an_id_is_not_one() -> None:
    assert key_seq_no("_seq_no:42") == 42
    assert key_seq_no("_seq_no:x") is None and key_seq_no("42") is None


def test_ids_query_filters_ids_keys_or_both() -> None:
    assert ids_query(["a", "b"]) == {"ids": {"values": ["a", "b"]}}
    assert ids_query(["_seq_no:3", "_seq_no:5"]) == {"terms": {"_seq_no": [3, 5]}}
    assert ids_query(["a", "_seq_no:3"]) == {"bool": {"should": [
        {"ids": {"values": ["a"]}}, {"terms": {"_seq_no": [3]}}]}}


def test_an_alias_over_two_indices_shows_each_doc_from_the_first_that_answers_it() -> None:
    hits = [Hit("a", 2.0, index="one"), Hit("b", 1.0, index="one"), Hit("a", 3.0, index="two")]
    found = first_of_each(hits)
    assert list(found) == ["a", "b"]
    assert found["a"].index == "one" and found["a"].score == 2.0


@dataclass
class Resolving:
    """An engine view that knows the `_id` of every even sequence number and resolves the
    others when asked, recording what it was asked."""

    known: dict[str, str] = field(default_factory=lambda: {"_seq_no:2": "two"})
    asked: list[list[str]] = field(default_factory=list)

    async def doc_ids(self, index: str, docs: list[str]) -> list[str]:
        self.asked.append(list(docs))
        self.known |= {doc: f"id{key_seq_no(doc)}" for doc in docs
                       if key_seq_no(doc) is not None and doc not in self.known}
        return [self.known_id(doc) for doc in docs]

    def known_id(self, doc: str) -> str:
        return self.known.get(doc, doc)


@dataclass
class Context:
    engine: Resolving
    index: str = "app"


def _result() -> SearchResult:
    hits = [RankedHit("_seq_no:2", 3.0), RankedHit("_seq_no:7", 2.0), RankedHit("plain", 1.0)]
    trace = TourRound(round=0, retrieved=3, newly_scored=1, ranking=["_seq_no:2", "_seq_no:9"],
                      labelled=["_seq_no:2"])
    return SearchResult("m", hits, [trace], 1, 2, Timings(),
                        lexical_scores={"_seq_no:2": 1.5})


async def test_with_doc_ids_names_every_hit_and_trace_by_id() -> None:
    context = Context(Resolving())
    result = await with_doc_ids(_result(), context)  # type: ignore[arg-type]
    assert [hit.id for hit in result.hits] == ["two", "id7", "plain"]
    (trace,) = result.rounds
    assert isinstance(trace, TourRound)
    # a key the resolution did not ask about, and no search met, stays a key
    assert trace.ranking == ["two", "_seq_no:9"] and trace.labelled == ["two"]
    assert result.lexical_scores == {"two": 1.5}
    assert context.engine.asked == [["_seq_no:2", "_seq_no:7", "plain"]]


async def test_with_doc_ids_resolves_only_the_docs_a_page_shows() -> None:
    context = Context(Resolving())
    result = await with_doc_ids(_result(), context, ["_seq_no:2"])  # type: ignore[arg-type]
    assert [hit.id for hit in result.hits] == ["two", "_seq_no:7", "plain"]
    assert context.engine.asked == [["_seq_no:2"]]


async def test_a_result_without_keys_is_left_as_it_is() -> None:
    context = Context(Resolving())
    plain = SearchResult("m", [RankedHit("a", 1.0)], [], 0, 1, Timings())
    assert await with_doc_ids(plain, context) is plain  # type: ignore[arg-type]
    assert context.engine.asked == []


def test_a_rescored_hit_keeps_every_other_field() -> None:
    hit = Hit("d", 1.0, {"t": "x"}, np.ones(2, dtype=np.float32), "i", 0.5)
    assert len(fields(Hit)) == 6  # a field added to Hit must be copied by `rescored` too
    assert hit.rescored(2.0) == replace(hit, score=2.0) and hit.score == 1.0
