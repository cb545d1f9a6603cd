"""The doc cache: what a caller's fetches gave, kept per caller, index and doc version, and
a search context that fetches only the docs it lacks."""

from __future__ import annotations

import numpy as np

from es_tour.engines import Hit
from es_tour.engines._types import doc_key
from es_tour.pipeline import DocCache, SearchContext, Timings
from es_tour.pipeline._doc_cache import FetchedDoc, doc_bytes

VECTOR = np.arange(4, dtype=np.float32)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _doc(doc_id: str, text: str = "some text", vector: np.ndarray | None = VECTOR):
    return FetchedDoc({"_id": doc_id}, {"title": doc_id, "text": text}, vector)


def test_a_kept_doc_comes_back_only_to_its_caller_on_its_index():
    cache = DocCache()
    mine = cache.view("caller-a", "uuid-1")
    mine.put(doc_key(7), _doc("d7"))
    assert mine.get(doc_key(7), vector=True).name == {"_id": "d7"}
    assert cache.view("caller-b", "uuid-1").get(doc_key(7), vector=False) is None
    # a new index under the same name has another uuid, and seq_nos that start again
    assert cache.view("caller-a", "uuid-2").get(doc_key(7), vector=False) is None
    assert (cache.counts.hits, cache.counts.misses) == (1, 2)


def test_a_doc_named_by_id_has_no_version_and_is_never_kept():
    cache = DocCache()
    view = cache.view("caller", "uuid")
    view.put("d7", _doc("d7"))
    assert view.get("d7", vector=False) is None and cache.nbytes == 0


def test_a_doc_kept_without_its_vector_does_not_serve_a_fetch_that_needs_one():
    view = DocCache().view("caller", "uuid")
    view.put(doc_key(1), _doc("d1", vector=None))
    assert view.get(doc_key(1), vector=False) is not None
    assert view.get(doc_key(1), vector=True) is None


def test_kept_docs_expire_after_the_ttl():
    clock = Clock()
    view = DocCache(ttl_s=300, timer=clock).view("caller", "uuid")
    view.put(doc_key(1), _doc("d1"))
    clock.now = 299
    assert view.get(doc_key(1), vector=True) is not None
    clock.now = 301
    assert view.get(doc_key(1), vector=True) is None


def test_the_cache_is_bounded_by_bytes_least_recently_used_first():
    one = doc_bytes(_doc("d0", "x" * 1000))
    cache = DocCache(max_bytes=3 * one + 10)
    view = cache.view("caller", "uuid")
    for seq_no in range(3):
        view.put(doc_key(seq_no), _doc(f"d{seq_no}", "x" * 1000))
    assert view.get(doc_key(0), vector=True) is not None  # now the most recently used
    view.put(doc_key(3), _doc("d3", "x" * 1000))
    assert cache.nbytes <= 3 * one + 10
    assert view.get(doc_key(1), vector=True) is None
    assert all(view.get(doc_key(n), vector=True) is not None for n in (0, 2, 3))
    view.put(doc_key(9), _doc("d9", "x" * 10_000))  # larger than the whole cache
    assert view.get(doc_key(9), vector=False) is None


class KeyedEngine:
    """Docs named by doc key, as a one-shard index's pool legs name them; counts fetches."""

    def __init__(self) -> None:
        self.fetched: list[list[str]] = []
        self.ids: dict[str, str] = {}

    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        self.fetched.append(list(ids))
        return [Hit(doc, 0.0, {"title": f"title {doc}", "embedding": (VECTOR + i).tolist()})
                for i, doc in enumerate(ids)]

    def known_id(self, doc: str) -> str:
        return self.ids.get(doc, f"id-of-{doc}")

    def known_name(self, doc: str) -> dict[str, str]:
        return {"_id": self.known_id(doc)}

    def remember_name(self, doc: str, name: dict[str, str]) -> None:
        self.ids[doc] = name["_id"]


async def test_a_search_fetches_only_the_docs_its_caller_has_not_fetched_before():
    cache = DocCache()
    hits = [Hit(doc_key(n), 1.0) for n in range(3)]

    def context(caller: str) -> tuple[SearchContext, KeyedEngine]:
        engine = KeyedEngine()
        return SearchContext(engine, "idx", None, None,  # type: ignore[arg-type]
                             fetched_docs=cache.view(caller, "uuid")), engine

    first, first_engine = context("a")
    fetched = await first.with_text(hits[:2], Timings(), vectors=True)
    assert first_engine.fetched == [[doc_key(0), doc_key(1)]]
    later, later_engine = context("a")
    again = await later.with_text(hits, Timings(), vectors=True)
    assert later_engine.fetched == [[doc_key(2)]]  # the one its caller had not fetched
    for before, now in zip(fetched, again[:2], strict=True):
        assert now.source == before.source and "embedding" not in now.source
        np.testing.assert_array_equal(now.vector, before.vector)
    # the page names kept docs by `_id` without a search
    assert later_engine.ids[doc_key(0)] == "id-of-" + doc_key(0)
    other, other_engine = context("b")
    await other.with_text(hits, Timings(), vectors=True)
    assert other_engine.fetched == [[doc_key(n) for n in range(3)]]


async def test_a_search_holds_the_docs_it_read_to_label_only_where_asked_each_as_sent():
    """A sidecar search (`held` given) holds every doc it fetched or found kept, each with
    its whole source as the engine sent it, the vector's numbers as they came; a context
    that is not one search's (an evaluation's, run over every query) holds none."""
    cache = DocCache()
    hits = [Hit(doc_key(n), 1.0) for n in range(3)]
    first = SearchContext(KeyedEngine(), "idx", None, None,  # type: ignore[arg-type]
                          fetched_docs=cache.view("a", "uuid"))
    await first.with_text(hits[:2], Timings(), vectors=True)
    assert first.held is None
    search = SearchContext(KeyedEngine(), "idx", None, None,  # type: ignore[arg-type]
                           fetched_docs=cache.view("a", "uuid"))
    search.held = {}
    await search.with_text(hits, Timings(), vectors=True)
    assert sorted(search.held) == [doc_key(n) for n in range(3)]  # two kept, one fetched
    assert search.held[doc_key(0)].whole_source() == {
        "title": f"title {doc_key(0)}", "embedding": VECTOR.tolist()}
