"""The demo's pick of a query where a round after round 0 found a relevant doc."""

from __future__ import annotations

from es_tour.cli.search import _later_round_find
from es_tour.pipeline import RankedHit, SearchResult, Timings


def _result(*hits: RankedHit) -> SearchResult:
    return SearchResult("tour-hard", list(hits), [], 0, 0, Timings())


def test_only_a_labelled_relevant_doc_first_retrieved_after_round_0_counts() -> None:
    relevant = {"r1": 1, "r0": 1, "filled": 1}
    hits = [RankedHit("r0", 3.0, round=0, label=0.9),  # round 0 had it: rerank would too
            RankedHit("x", 2.0, round=1, label=0.8),  # not relevant
            RankedHit("filled", 1.5, round=1, label=None),  # filled in, never labelled
            RankedHit("r1", 1.0, round=1, label=0.7)]
    assert _later_round_find(_result(*hits), relevant) == (4, hits[3])
    assert _later_round_find(_result(*hits[:3]), relevant) is None
    assert _later_round_find(_result(*hits), {"r1": 0}) is None  # judged not relevant
