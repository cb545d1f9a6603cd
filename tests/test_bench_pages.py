"""make bench-pages' pure parts: the pages sent, each side's per-search figures, the
ratios to the plain match's same page, and the page written."""

from __future__ import annotations

from collections import Counter

import pytest

from es_tour.bench._relay import Traffic
from es_tour.bench.pages import (
    PAGES,
    SIDES,
    PageRun,
    markdown,
    page_body,
    per_page,
    table,
)


def test_each_page_is_the_applications_search_further_on() -> None:
    bodies = [page_body("fever", page) for page in PAGES]
    assert [(body["from"], body["size"]) for body in bodies] == [(0, 10), (10, 10), (20, 10)]
    assert all(body["query"] == {"match": {"text": "fever"}} and body["_source"] is False
               and "ext" not in body for body in bodies)


def test_a_pages_figures_are_per_search_with_the_engines_idle_taken_off() -> None:
    run = PageRun(latencies_ms=[4.0, 6.0, 5.0, 100.0], reused=3, searches=4,
                  engine_cpu_ms=30.0, engine_wall_s=2.0, sidecar_cpu_s=0.02)
    for _ in range(2):
        run.count(Traffic(requests=1, bytes_received=2048,
                          calls=Counter({"POST /_msearch": 1})))
    row = per_page("kept", 2, run, idle_ms_per_s=5.0)
    assert row["engine_cpu_ms"] == pytest.approx((30.0 - 5.0 * 2.0) / 4)
    assert row["sidecar_cpu_ms"] == pytest.approx(5.0)
    assert row["engine_calls"] == 1.0 and row["kb_received"] == 2.0
    assert row["calls"] == {"POST /_msearch": 1.0}
    assert row["p50_ms"] == 5.5 and row["reused"] == 0.75
    # the engine's own side has no sidecar CPU
    assert per_page("engine", 2, PageRun(searches=1, engine_cpu_ms=1.0), 0.0)[
        "sidecar_cpu_ms"] is None


def _row(side: str, page: int, cpu: float, p50: float, reused: float = 0.0) -> dict:
    return {"side": side, "page": page, "engine_cpu_ms": cpu, "sidecar_cpu_ms": None,
            "engine_calls": 1.0, "kb_received": 1.0, "calls": {"POST /x": 1.0},
            "p50_ms": p50, "reused": reused, "searches": 10}


def test_each_row_is_set_against_the_plain_matchs_same_page() -> None:
    rows = [_row("engine", 1, 2.0, 3.0), _row("engine", 2, 4.0, 2.0),
            _row("kept", 1, 8.0, 24.0), _row("kept", 2, 6.0, 5.0, reused=1.0)]
    lines = table(rows)
    kept_page_2 = next(line for line in lines if line.startswith(f"| {SIDES['kept']} | 2 |"))
    cells = [cell.strip() for cell in kept_page_2.strip("|").split("|")]
    assert cells[3] == "1.50" and cells[8] == "2.50" and cells[9] == "100%"
    kept_page_1 = next(line for line in lines if line.startswith(f"| {SIDES['kept']} | 1 |"))
    assert [cell.strip() for cell in kept_page_1.strip("|").split("|")][3] == "4.00"


def test_the_page_shows_every_row_of_every_engine() -> None:
    rows = [_row(side, page, 1.0 + page, 2.0) for side in SIDES for page in PAGES]
    report = {"command": "python -m es_tour.bench.pages --dataset ../shared/datasets/scifact",
              "date": "today", "machine": "2 cores", "load_average": [0.5, 1.5],
              "plan": {"batches": 4, "batch": 50, "counted": 10, "warmup_batches": 1},
              "settings": {"index.tour.method": "hybrid-tour"}, "workers": 2,
              "engines": [{"engine": engine, "version": "1", "idle_cpu_ms_per_s": 9.0,
                           "rankings_kept": 200, "rankings_kept_bytes": 2048 * 200,
                           "rows": rows} for engine in ("opensearch", "elasticsearch")]}
    page = markdown(report)
    assert "## opensearch 1" in page and "## elasticsearch 1" in page
    assert "`method=hybrid-tour`" in page
    assert sum(line.startswith(f"| {SIDES['unkept']} |") for line in page.splitlines()) == 6
    assert "- plain match, page 3: 1.0 × `POST /x`" in page
    assert "kept 200 rankings in 0.39 MiB, 2.0 KB each" in page
