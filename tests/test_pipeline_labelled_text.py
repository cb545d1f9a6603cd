"""What the labeler reads of a doc, and under which key: its text fields read as the engine
reads them (dotted names, objects, arrays), per concrete index (an alias and its index share
labels and stored vectors), and per text the caller was shown (field-level security)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from es_tour.engines import Hit
from es_tour.models import doc_key
from es_tour.pipeline import SearchContext, Timings, doc_text
from es_tour.pipeline._context import field_values
from es_tour.pipeline._vector_store import record_id
from es_tour.tour import LabelCache
from tests.conftest import OneVectorEncoder


@pytest.mark.parametrize(("source", "field", "values"), [
    ({"title": "Vitamin D"}, "title", ["Vitamin D"]),
    ({"meta": {"title": "Vitamin D"}}, "meta.title", ["Vitamin D"]),  # an object
    ({"meta.title": "Vitamin D"}, "meta.title", ["Vitamin D"]),  # a dotted name, flat
    ({"meta": {"a": {"title": "deep"}}}, "meta.a.title", ["deep"]),
    ({"meta": {"a.title": "half"}}, "meta.a.title", ["half"]),  # flat below an object
    ({"title": ["one", "two"]}, "title", ["one", "two"]),  # an array: each value
    ({"authors": [{"name": "Ada"}, {"name": "Bo"}, {}]}, "authors.name", ["Ada", "Bo"]),
    # an object field named itself: every value beneath it, in order (as `meta.*` reads)
    ({"meta": {"title": "T", "abstract": "A", "tags": ["x", "y"], "year": 2010}}, "meta",
     ["T", "A", "x", "y", "2010"]),
    ({"title": None, "text": ""}, "title", []),
    ({"flag": True}, "flag", ["true"]),
    ({"meta": "not an object"}, "meta.title", []),
    ({}, "meta.title", []),
])
def test_a_field_is_read_as_the_engine_reads_it(source, field, values) -> None:
    assert field_values(source, field) == values


def test_a_docs_text_joins_its_fields_values_dotted_ones_included() -> None:
    source = {"meta": {"title": "Vitamin D"}, "body": {"abstract": "It helps.",
                                                       "sections": ["Bones.", "Sun."]}}
    assert doc_text(source, ("meta.title", "body")) == "Vitamin D It helps. Bones. Sun."
    # `source.get(name)` read none of these: the labeler got empty text
    assert doc_text(source, ("meta.title",)) == "Vitamin D"
    assert doc_text({}, ("meta.title", "text")) == ""


def test_a_caller_shown_less_text_is_labelled_under_another_key() -> None:
    """Field-level security: the text a caller sees is what its key's digest is made of, so
    a vector made from text it may not see is never read for it."""
    full = {"title": "Vitamin D", "text": "A secret abstract."}
    hidden = {"title": "Vitamin D"}  # what a caller without `text` is shown
    fields = ("title", "text")
    assert doc_text(hidden, fields) == "Vitamin D"
    seen, unseen = (doc_key("idx", "1", doc_text(s, fields)) for s in (hidden, full))
    assert seen != unseen and record_id(seen) != record_id(unseen)


class RecordingLabeler:
    name = "recording"
    pairs_scored = 0

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, str]]]] = []

    def score(self, query: str, docs: Sequence[tuple[str, str]], index: str = "") -> np.ndarray:
        self.calls.append((index, list(docs)))
        return np.ones(len(docs), dtype=np.float32)


class RecordingStore:
    def __init__(self) -> None:
        self.filled: list[tuple[str, list[tuple[str, str]]]] = []

    async def fill(self, labeler, index, docs):
        self.filled.append((index, list(docs)))
        return []

    def keep(self, lacked) -> None:
        pass


async def test_docs_are_labelled_and_stored_under_the_concrete_index_that_holds_them() -> None:
    labeler, store = RecordingLabeler(), RecordingStore()
    context = SearchContext(object(), "papers", OneVectorEncoder(np.ones(2)),  # type: ignore[arg-type]
                            labeler, store=store)  # type: ignore[arg-type]
    hits = [Hit("1", 1.0, {"title": "a"}, index="papers-000002"),
            Hit("2", 1.0, {"title": "b"}, index="papers-000001"),
            Hit("3", 1.0, {"title": "c"}, index="papers-000002"),
            Hit("4", 1.0, {"title": "d"})]  # no `_index` known: the name searched
    scores, newly = await context.label("q", hits, Timings(), LabelCache())
    assert newly == 4 and scores.tolist() == [1.0] * 4
    expected = [("papers-000002", [("1", "a"), ("3", "c")]), ("papers-000001", [("2", "b")]),
                ("papers", [("4", "d")])]
    assert labeler.calls == expected and store.filled == expected
