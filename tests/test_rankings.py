"""The rankings kept for a caller's later pages: what tells two searches apart, and what
is never kept."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import numpy as np

from es_tour.pipeline import RankedHit, SearchResult, Timings
from es_tour.server._options import Resolved
from es_tour.server._rankings import RankingCache, ranking_key, window_fetched
from es_tour.server._request import SearchRequest
from es_tour.server._rounds import Ranked

CHOSEN = Resolved("hybrid-tour", {"k": 10, "budget": 20}, "default", "retriever",
                  "embedding", ("title", "text"))


def _request(**body: object) -> SearchRequest:
    return SearchRequest("docs", "vitamin d", None, None, size=10, from_=0,
                         body={"query": {"match": {"text": "vitamin d"}}, **body})


def _ranked(fallback: str | None = None, degraded: bool = False) -> Ranked:
    hits = [RankedHit(doc, 1.0, {"text": "a labelled doc's text"}, 0, ("bm25",), 0.5)
            for doc in ("a", "b", "c")]
    result = SearchResult("hybrid-tour", hits, [], 20, 4, Timings(), degraded=degraded)
    return Ranked(result, fallback, ["a", "b", "c"])


def test_a_later_page_of_the_same_search_has_the_same_key() -> None:
    first = ranking_key("caller", "uuid", _request(**{"from": 0, "size": 10}), CHOSEN)
    later = ranking_key("caller", "uuid", replace(
        _request(**{"from": 20, "size": 5}), from_=20, size=5), CHOSEN)
    assert first == later


def test_callers_indices_bodies_and_options_each_make_another_search() -> None:
    key = ranking_key("caller", "uuid", _request(), CHOSEN)
    others = [
        ranking_key("someone else", "uuid", _request(), CHOSEN),
        ranking_key("caller", "another index uuid", _request(), CHOSEN),
        ranking_key("caller", "uuid", _request(post_filter={"term": {"year": 2020}}), CHOSEN),
        ranking_key("caller", "uuid", replace(_request(), params={"routing": "x"}), CHOSEN),
        ranking_key("caller", "uuid", replace(_request(), vector=np.ones(3, np.float32)),
                    CHOSEN),
        ranking_key("caller", "uuid", _request(), replace(CHOSEN, options={"k": 10})),
        ranking_key("caller", "uuid", _request(), replace(CHOSEN, method="tour-soft")),
        ranking_key("caller", "uuid", _request(), replace(CHOSEN, labeler="minilm-l6")),
        ranking_key("caller", "uuid", _request(), replace(CHOSEN, window=50)),
    ]
    assert key not in others and len(set(others)) == len(others)


def test_a_full_refinement_is_kept_and_can_be_forgotten() -> None:
    cache = RankingCache()
    cache.keep("k", _ranked())
    kept = cache.get("k")
    assert kept is not None and kept.window == ["a", "b", "c"]
    # ids, scores and labels kept; no doc's text (the engine fetches each page)
    assert [(hit.id, hit.score, hit.label) for hit in kept.result.hits] == [
        ("a", 1.0, 0.5), ("b", 1.0, 0.5), ("c", 1.0, 0.5)]
    assert all(hit.source == {} for hit in kept.result.hits)
    cache.forget("k")
    assert cache.get("k") is None
    cache.forget("k")  # forgetting what is gone is no error


def test_a_fallback_or_degraded_ranking_is_never_kept() -> None:
    cache = RankingCache()
    cache.keep("fallback", _ranked(fallback="knn"))
    cache.keep("degraded", _ranked(degraded=True))
    assert cache.get("fallback") is None and cache.get("degraded") is None


def test_rankings_are_bounded_in_bytes_and_in_time() -> None:
    cache = RankingCache(ttl_s=60)
    cache.keep("a", _ranked())
    one = cache.nbytes
    # what it holds: its ids, scores and labels as JSON, and no doc's text
    assert 100 < one < 2000
    small = RankingCache(ttl_s=60, max_bytes=int(2.5 * one))
    for key in ("a", "b", "c"):
        small.keep(key, _ranked())
    assert len(small) == 2 and small.get("a") is None and small.get("c") is not None
    assert small.nbytes == 2 * one
    tiny = RankingCache(ttl_s=60, max_bytes=one - 1)
    tiny.keep("a", _ranked())  # larger than the whole cache: not kept, no error
    assert len(tiny) == 0 and tiny.nbytes == 0
    brief = RankingCache(ttl_s=0.01)
    brief.keep("k", _ranked())
    time.sleep(0.05)
    assert brief.get("k") is None


def test_a_page_that_lacks_a_doc_of_its_window_is_told() -> None:
    hits = [{"_id": "a"}, {"_id": "b"}]
    assert window_fetched(("a", "b"), hits)
    assert window_fetched((), [])
    assert not window_fetched(("a", "gone"), hits)


def test_the_workers_of_one_sidecar_share_their_rankings(tmp_path) -> None:
    """Two workers' caches on the run's directory: what one keeps the other reads, a
    ranking one forgets is gone for both, and each reads a copy of its own."""
    one = RankingCache(ttl_s=60, shared_dir=tmp_path / "rankings")
    other = RankingCache(ttl_s=60, shared_dir=tmp_path / "rankings")
    try:
        one.keep("k", _ranked())
        read = other.get("k")
        assert read is not None and read.window == ["a", "b", "c"]
        assert all(hit.source == {} for hit in read.result.hits)
        assert len(other) == 1 and other.nbytes > 0
        read.window.append("changed")
        assert one.get("k").window == ["a", "b", "c"]
        other.keep("fallback", _ranked(fallback="knn"))
        assert one.get("fallback") is None
        other.forget("k")
        assert one.get("k") is None
    finally:
        one.close()
        other.close()


def test_shared_rankings_expire_and_stay_within_their_bytes(tmp_path) -> None:
    brief = RankingCache(ttl_s=0.01, shared_dir=tmp_path / "brief")
    brief.keep("k", _ranked())
    time.sleep(0.05)
    assert brief.get("k") is None
    brief.close()
    small = RankingCache(ttl_s=60, max_bytes=256 << 10, shared_dir=tmp_path / "small")
    big = replace(_ranked(), window=[f"doc{i}" for i in range(2000)])
    for i in range(100):
        small.keep(f"k{i}", big)
    assert small.nbytes <= 2 * (256 << 10) and len(small) < 100
    assert small.get("k99") is not None and small.get("k0") is None
    small.close()


def test_a_shared_cache_that_fails_is_a_miss_not_an_error(tmp_path, caplog) -> None:
    cache = RankingCache(ttl_s=60, shared_dir=tmp_path / "gone")
    cache.keep("k", _ranked())
    cache.close()
    shutil.rmtree(tmp_path / "gone")
    (tmp_path / "gone").write_text("not a directory")  # its database can no longer open
    assert cache.get("k") is None
    cache.keep("k", _ranked())  # nothing raised
    assert len(cache) == 0
    assert "could not be read or written" in caplog.text
