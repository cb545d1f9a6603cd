"""The demo's pick of a query where a round after round 0 found a relevant doc, and its
tables at 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from es_tour.cli.search import (
    DEMO_BUDGETS,
    DEMO_FIRST_STAGE,
    LABEL_WIDTH,
    _later_round_find,
    print_table,
    short_labels,
)
from es_tour.evaluation import MethodReport, MethodSpec
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


def _report(label: str) -> MethodReport:
    # wide figures: seconds-long latencies are what a demo on two cores shows
    return MethodReport(MethodSpec.parse(label), {"ndcg@10": 0.6543, "recall@100": 0.9012,
                                                  "mrr@10": 0.6123},
                        [3657.2, 12345.6], [20, 20], {})


def _rendered(labels: list[str], width: int) -> str:
    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None), "At 20 labeler pairs per "
                "query: first 20 scifact test queries on opensearch", [_report(m) for m in labels])
    return out.getvalue()


def test_the_demo_tables_keep_every_method_name_whole_at_80_columns() -> None:
    for labelling in DEMO_BUDGETS.values():
        labels = [*DEMO_FIRST_STAGE, *labelling]
        text = _rendered(labels, 80)
        lines = text.splitlines()
        for label in labels:
            assert any(label in line for line in lines), f"{label} is cut:\n{text}"
        table = [line for line in lines if "│" in line or "┃" in line]
        assert table and max(map(len, table)) <= 80
        assert "…" not in text


def test_labels_too_long_for_the_column_get_distinct_keys() -> None:
    labels = ["bm25", "hybrid-tour:budget=10:k=5:w_bm25=0.3", "hybrid-tour:budget=20:k=10",
              "hybrid-tour:budget=10:k=5:w_bm25=0.3"]
    shown = short_labels(labels)
    assert shown["bm25"] == "bm25"
    long = labels[1:3]
    assert all(len(shown[label]) <= LABEL_WIDTH for label in long)
    assert len({shown[label] for label in long}) == len(long)  # told apart
