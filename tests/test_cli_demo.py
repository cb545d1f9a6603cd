"""The demo: the recommended settings it puts on its index, the index's method shown first
against knn and bm25 and opened in the playground on the compared query with the median
gain, its pick of a query where a round after round 0 found a relevant doc, and its tables
at 80 columns."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from rich.console import Console

from es_tour.cli import demo
from es_tour.cli._checks import engine_target
from es_tour.cli._shared import LABEL_WIDTH, print_table, short_labels
from es_tour.cli.demo import (
    DEMO_BUDGETS,
    DEMO_FIRST_STAGE,
    PlaygroundPick,
    _later_round_find,
    configured_label,
    demo_tables,
    playground_link,
    playground_query,
)
from es_tour.evaluation import MethodReport, MethodSpec
from es_tour.pipeline import RankedHit, SearchContext, SearchResult, Timings
from es_tour.recommended import FRONTIER_20
from es_tour.server import ServerConfig
from es_tour.server._options import Resolved, index_settings, resolve


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


# --- the recommended settings, and the index's method first ------------------------------

class _SettingsEngine:
    """An engine that keeps what a settings call puts, and answers flat settings as the
    engines do (strings)."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, dict]] = []
        self.flat: dict[str, str] = {"index.number_of_shards": "1"}

    def engine_errors(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def put_settings(self, index: str, settings: Mapping[str, Any]) -> None:
        self.puts.append((index, dict(settings)))
        self.flat |= {key: str(value).lower() if isinstance(value, bool) else str(value)
                      for key, value in settings.items()}

    async def settings(self, index: str) -> dict[str, str]:
        return dict(self.flat)


class _Method:
    def __init__(self, name: str):
        self.name = name

    async def search(self, text: str, k: int) -> SearchResult:
        hits = [RankedHit(f"{self.name}-{n}", 1.0 - n / 10, source={"title": f"t{n}"})
                for n in range(k)]
        return SearchResult(self.name, hits, [], 20 if self.name == "hybrid-tour" else 0, 0,
                            Timings())


def _first_comparison(monkeypatch: pytest.MonkeyPatch) -> tuple[_SettingsEngine, list, str,
                                                                   Resolved]:
    engine = _SettingsEngine()
    built: list[tuple[str, dict]] = []

    def build(name: str, context: SearchContext, options: Mapping[str, Any]) -> _Method:
        built.append((name, dict(options)))
        return _Method(name)

    out = io.StringIO()
    monkeypatch.setattr(demo, "build", build)
    monkeypatch.setattr(demo, "console", Console(file=out, width=80, color_system=None))
    context = SearchContext(engine, "scifact", None, None)  # type: ignore[arg-type]
    config = ServerConfig(upstream="http://127.0.0.1:9750")
    chosen = asyncio.run(demo._first_comparison(context, config, "1", "a query",
                                                {"hybrid-tour-1": 1, "knn-0": 1}))
    return engine, built, out.getvalue(), chosen


def test_the_demo_puts_the_frontiers_settings_on_its_index_and_says_why(monkeypatch) -> None:
    engine, _, text, chosen = _first_comparison(monkeypatch)
    assert engine.puts == [("scifact", FRONTIER_20)]
    assert FRONTIER_20["index.tour.method"] == "hybrid-tour"
    assert FRONTIER_20["index.tour.budget"] == 20
    line = " ".join(text.split("query 1:")[0].split())
    assert line.startswith("applied to scifact index.tour.{enabled: true, method: hybrid-tour")
    assert "bm25_weight: 0.3" in line and "budget: 20" in line
    assert "SciFact train at 20 labeler pairs per query (docs/benchmarks/frontier.md)" in line
    # what the index now names, resolved as the sidecar resolves it
    assert chosen.method == "hybrid-tour"
    assert chosen.options == {"k": 10, "budget": 20, "pool": "hybrid-linear",
                              "lexical": "none", "w_bm25": 0.3, "w_dense": 0.0}
    assert {chosen.origins[option] for option in chosen.options} == {"index"}


def test_the_first_comparison_is_knn_and_bm25_against_the_indexs_method(monkeypatch) -> None:
    _, built, text, chosen = _first_comparison(monkeypatch)
    assert built == [("knn", {}), ("bm25", {}), ("hybrid-tour", chosen.options)]
    lines = text.splitlines()
    heads = [line for line in lines if "pairs scored" in line]
    assert heads[0].startswith("knn ") and heads[1].startswith("bm25 ")
    assert heads[2].startswith(f"{DEMO_BUDGETS[20][-1]} (the index's method) (20 pairs")
    assert len(heads) == 3
    marked = [line.split()[1] for line in lines if "✓ relevant" in line]
    assert marked == ["knn-0", "hybrid-tour-1"]


def test_the_indexs_method_is_a_row_of_the_20_pair_table() -> None:
    flat = {key: str(value) for key, value in FRONTIER_20.items()}
    chosen = resolve({}, index_settings(flat),
                     ServerConfig(upstream="http://127.0.0.1:9750").defaults())
    label = configured_label(chosen)
    assert label == DEMO_BUDGETS[20][-1]
    assert demo_tables(label) == {budget: (*DEMO_FIRST_STAGE, *labels)
                                  for budget, labels in DEMO_BUDGETS.items()}
    # a method no table has gets a row in its budget's table
    other = replace(chosen, options={**chosen.options, "budget": 10, "w_bm25": 0.5})
    label = configured_label(other)
    assert label == ("hybrid-tour:budget=10:k=10:lexical=none:pool=hybrid-linear:w_bm25=0.5"
                     ":w_dense=0.0")
    assert demo_tables(label)[10][-1] == label and label not in demo_tables(label)[20]
    assert MethodSpec.parse(label).options == other.options


def test_the_playground_opens_on_knn_against_the_indexs_method() -> None:
    link = playground_link("127.0.0.1:9201", "scifact", "0-dimensional biomaterials",
                           "hybrid-tour")
    query = parse_qs(urlsplit(link).query)
    assert link.startswith("http://127.0.0.1:9201/_tour/playground?")
    assert query == {"index": ["scifact"], "q": ["0-dimensional biomaterials"],
                     "left": ["knn"], "right": ["hybrid-tour"]}


def test_the_playground_opens_on_the_median_gain_among_the_queries_the_method_changed():
    knn = {"a": 0.387, "b": 0.5, "c": 0.2, "d": 0.6, "e": 0.1}
    method = {"a": 0.0, "b": 0.5, "c": 0.5, "d": 0.7, "e": 0.1}  # b and e unchanged
    pick = playground_query(knn, method)
    # gains of the changed: a -0.387, d +0.1, c +0.3: the median is d's
    assert pick == PlaygroundPick("d", 0.6, 0.7, better=2, worse=1, sample=5)
    assert pick.reason() == (
        "the playground opens on query d: nDCG@10 0.600 by knn, 0.700 by the index's method "
        "(+0.100), the median gain of the 3 of 5 test queries whose nDCG@10 it changed "
        "(2 up, 1 down)")


def test_an_even_count_opens_on_the_lower_middle_gain_and_equal_gains_in_query_order():
    knn = {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}
    assert playground_query(knn, {"a": 0.9, "b": 0.4, "c": 0.6, "d": 0.8}).qid == "c"
    # a, b and c gain the same: the middle one in the sample's order
    assert playground_query(knn, {"a": 0.6, "b": 0.6, "c": 0.6, "d": 0.5}).qid == "b"
    # the order given, not the ids' order
    knn = {"z": 0.5, "y": 0.5, "x": 0.5}
    assert playground_query(knn, {"z": 0.6, "y": 0.6, "x": 0.6}).qid == "y"
    assert playground_query(knn, {"z": 0.6, "y": 0.6, "x": 0.5}).qid == "z"


def test_a_reports_ndcg_by_query_is_each_querys_own_in_its_order():
    results = {"q2": _result(RankedHit("x", 2.0), RankedHit("r", 1.0)),
               "q1": _result(RankedHit("r", 1.0))}
    report = MethodReport(MethodSpec.parse("knn"), {}, [1.0, 1.0], [0, 0], results)
    by_query = report.ndcg_by_query({"q1": {"r": 1}, "q2": {"r": 1}})
    assert list(by_query) == ["q2", "q1"]
    assert by_query["q1"] == 1.0
    assert by_query["q2"] == pytest.approx(1 / np.log2(3))


def test_a_method_that_changed_no_query_opens_on_the_first_and_says_so():
    knn = {"q1": 0.3, "q2": 0.8}
    pick = playground_query(knn, {"q1": 0.3, "q2": 0.8 + 1e-12})
    assert pick == PlaygroundPick("q1", 0.3, 0.3, better=0, worse=0, sample=2)
    assert pick.reason() == ("the playground opens on query q1, the sample's first: the "
                             "index's method left the nDCG@10 of all 2 test queries at knn's")


def test_the_bench_and_the_demo_share_one_frontier_setting() -> None:
    from es_tour.bench import app, cost

    assert app.FRONTIER_20 is cost.FRONTIER_20 is FRONTIER_20
    assert demo.FRONTIER_20 is FRONTIER_20


def test_the_demo_serves_the_playground_which_serve_leaves_off_unless_asked() -> None:
    target = engine_target("opensearch", "http://127.0.0.1:9750")
    assert demo.demo_sidecar(target).playground is True
    assert ServerConfig(upstream=target.url).playground is False
