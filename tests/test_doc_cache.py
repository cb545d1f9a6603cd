"""The doc cache: what a caller's fetches gave, kept per caller, index and doc version, and
a search context that fetches only the docs it lacks."""

from __future__ import annotations

import numpy as np

from es_tour.engines import Hit
from es_tour.engines._types import doc_key
from es_tour.pipeline import DocCache, SearchContext, Timings
from es_tour.pipeline._doc_cache import FetchedDoc, doc_bytes, kept_source_value

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


def test_a_source_vector_of_float32s_is_kept_once_as_the_docs_own_vector():
    # the floats es-tour writes: each a float32, as JSON's doubles
    vector = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    written = [float(x) for x in vector]
    kept = kept_source_value(written, vector)
    assert kept is vector
    doc = FetchedDoc({"_id": "d"}, {"text": "t"}, vector, "idx", ("embedding", kept))
    assert doc.whole_source()["embedding"] == written  # every number as it came
    apart = FetchedDoc({"_id": "d"}, {"text": "t"}, vector.copy(), "idx",
                       ("embedding", np.asarray(written, dtype=np.float64)))
    assert doc_bytes(apart) - doc_bytes(doc) == 384 * 8


def test_a_source_vector_whose_floats_are_not_float32s_keeps_its_own_numbers():
    written = [0.1, 1e-7, -2.5]  # doubles a float32 would round
    vector = np.asarray(written, dtype=np.float32)
    kept = kept_source_value(written, vector)
    assert kept is not vector and kept.dtype == np.float64
    assert FetchedDoc({"_id": "d"}, {}, vector, "idx", ("embedding", kept)
                      ).whole_source()["embedding"] == written


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


def _pages(docs: dict[str, FetchedDoc], asked: list[int]):
    """A read-ahead's pages of `docs`, recording the page size each read asked for."""
    async def pages(size: int):
        asked.append(size)
        items = list(docs.items())
        for start in range(0, len(items), size):
            yield dict(items[start:start + size])
    return pages


async def _read(cache: DocCache, caller: str, docs: dict[str, FetchedDoc],
                asked: list[int] | None = None) -> None:
    cache.read_ahead(cache.view(caller, "uuid"), _pages(docs, [] if asked is None else asked))
    await cache.read_ahead_done()


async def test_a_read_ahead_keeps_its_callers_docs_for_its_later_searches_alone():
    cache = DocCache()
    docs = {doc_key(n): _doc(f"d{n}") for n in range(250)}
    asked: list[int] = []
    await _read(cache, "a", docs, asked)
    assert cache.counts.read_ahead == 250 and asked == [100]
    mine = cache.view("a", "uuid")
    assert all(mine.get(doc_key(n), vector=True).name == {"_id": f"d{n}"} for n in range(250))
    assert cache.view("b", "uuid").get(doc_key(0), vector=False) is None
    assert cache.view("a", "uuid-2").get(doc_key(0), vector=False) is None


async def test_a_caller_and_index_is_read_ahead_once_a_ttl():
    clock = Clock()
    cache = DocCache(ttl_s=300, timer=clock)
    docs = {doc_key(n): _doc(f"d{n}") for n in range(5)}
    await _read(cache, "a", docs)
    await _read(cache, "a", docs)
    assert cache.counts.read_ahead == 5
    await _read(cache, "b", docs)  # another caller's own read
    assert cache.counts.read_ahead == 10
    clock.now = 301  # the docs read have expired: read again
    assert cache.view("a", "uuid").get(doc_key(0), vector=False) is None
    await _read(cache, "a", docs)
    assert cache.counts.read_ahead == 15
    assert cache.view("a", "uuid").get(doc_key(0), vector=False) is not None


async def test_one_read_ahead_runs_at_a_time():
    cache = DocCache()
    docs = {doc_key(n): _doc(f"d{n}") for n in range(5)}
    cache.read_ahead(cache.view("a", "uuid"), _pages(docs, []))
    cache.read_ahead(cache.view("b", "uuid"), _pages(docs, []))  # while a's runs: none
    await cache.read_ahead_done()
    assert cache.counts.read_ahead == 5
    assert cache.view("b", "uuid").get(doc_key(0), vector=False) is None


async def test_a_read_ahead_stops_at_its_docs_and_at_three_quarters_of_the_cache():
    docs = {doc_key(n): _doc(f"d{n}", "x" * 1000) for n in range(400)}
    few = DocCache(preload_docs=30)
    asked: list[int] = []
    await _read(few, "a", docs, asked)
    assert asked == [30] and few.counts.read_ahead == 30
    one = doc_bytes(_doc("d0", "x" * 1000))
    small = DocCache(max_bytes=100 * one)
    await _read(small, "a", {key: doc for key, doc in list(docs.items())})
    # pages of 100 docs: the first fills three quarters, and the read stops there
    assert small.counts.read_ahead == 100 and small.nbytes <= 100 * one
    off = DocCache(preload_docs=0)
    await _read(off, "a", docs)
    assert off.counts.read_ahead == 0 and off.nbytes == 0


async def test_a_failed_read_ahead_keeps_what_it_read_and_raises_nothing():
    from es_tour.errors import EngineError

    async def failing(size: int):
        yield {doc_key(0): _doc("d0")}
        raise EngineError(503, {"error": {"type": "unavailable", "reason": "down"}})

    cache = DocCache()
    cache.read_ahead(cache.view("a", "uuid"), failing)
    await cache.read_ahead_done()
    assert cache.counts.read_ahead == 1
    assert cache.view("a", "uuid").get(doc_key(0), vector=False) is not None


def test_a_lookup_of_a_doc_key_not_kept_marks_the_view_missed():
    view = DocCache().view("a", "uuid")
    view.get("some-id", vector=False)  # an `_id`: never kept, no miss of the cache's
    assert not view.missed
    view.get(doc_key(3), vector=False)
    assert view.missed


class PagedEngine(KeyedEngine):
    """A one-shard index of `docs` doc keys, paged in key order as the engine pages them."""

    def __init__(self, docs: int) -> None:
        super().__init__()
        self.docs = docs
        self.pages: list[tuple[int, str | None]] = []

    def own_view(self) -> PagedEngine:
        return self

    async def docs_in_key_order(self, index, size, after=None):
        self.pages.append((size, after))
        start = 0 if after is None else int(after.removeprefix(doc_key(0)[:-1])) + 1
        return [Hit(doc_key(n), 0.0, {"title": f"title {n}", "embedding": (VECTOR + n).tolist()})
                for n in range(start, min(start + size, self.docs))]


async def test_a_context_reads_its_callers_docs_ahead_as_its_fetch_keeps_them():
    engine = PagedEngine(7)
    context = SearchContext(engine, "idx", None, None)  # type: ignore[arg-type]
    pages = [page async for page in context.docs_ahead(3)]
    assert [len(page) for page in pages] == [3, 3, 1]
    assert engine.pages == [(3, None), (3, doc_key(2)), (3, doc_key(5))]
    doc = pages[1][doc_key(4)]
    assert doc.source == {"title": "title 4"} and doc.name == {"_id": "id-of-" + doc_key(4)}
    np.testing.assert_array_equal(doc.vector, VECTOR + 4)
    assert doc.whole_source() == {"title": "title 4", "embedding": (VECTOR + 4).tolist()}
