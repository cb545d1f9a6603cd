"""The query-precision bench's comparison and page, on made-up per-query figures."""

from __future__ import annotations

from es_tour.bench.query_precision import METHODS, compare, markdown


def test_compare_counts_the_queries_each_precision_moved_past_the_threshold():
    fp32 = {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5}
    int8 = {"q1": 0.6, "q2": 0.505, "q3": 0.3, "q4": 0.5}
    row = compare(fp32, int8)
    assert row == {"fp32": 0.5, "int8": 0.4763, "better": 1, "worse": 1}


def test_the_page_gives_each_graphs_cpu_against_fp32_and_each_methods_change():
    row = {"fp32": 0.7, "int8": 0.699, "better": 2, "worse": 3}
    page = markdown({"date": "d", "machine": "m", "dataset": "scifact", "queries": 300,
                     "command": "python -m es_tour.bench.query_precision",
                     "cpu_ms_per_query": {"fp32": 10.0, "int8": 5.0},
                     "cosine": {"mean": 0.99, "min": 0.98},
                     "rankings": dict.fromkeys(METHODS, row)})
    assert "| int8 | 5.0 | 0.50× |" in page
    assert f"| `{METHODS[0]}` | 0.7000 | 0.6990 | -0.0010 | 2 / 3 |" in page
