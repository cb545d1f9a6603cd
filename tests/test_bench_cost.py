"""`make bench-cost`'s pure parts: the query stream, the quantiles and the page's figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from es_tour.bench.cost import markdown, quantiles, stream
from es_tour.datasets import BeirDataset


def _beir(root: Path) -> BeirDataset:
    """A tiny BEIR set: three train and two test queries, one text in both splits."""
    root.mkdir()
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "x"}) + "\n")
    queries = [("1", "a"), ("2", "b"), ("3", "shared"), ("4", "shared"), ("5", "c")]
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n"
                                              "2\td1\t1\n3\td1\t1\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n4\td1\t1\n5\td1\t1\n")
    return BeirDataset(root)


def test_the_stream_holds_each_query_text_once_in_a_fixed_order(tmp_path: Path) -> None:
    data = _beir(tmp_path / "beir")
    first, again = stream(data), stream(data)
    assert first.queries == again.queries
    assert sorted(text for _, text in first.queries) == ["a", "b", "c", "shared"]
    assert set(first.test) == {"5"} | ({"4"} & {qid for qid, _ in first.queries})


def test_quantiles_report_p50_p95_and_p99() -> None:
    q = quantiles([float(ms) for ms in range(1, 101)])
    assert q["n"] == 100 and q["p50_ms"] == 50.5 and q["p95_ms"] == 95.0 and q["p99_ms"] == 99.0
    assert quantiles([])["p50_ms"] is None


def _way(p50: float, rate16: float | None) -> dict:
    return {"n": 10, "p50_ms": p50, "p95_ms": p50 * 2, "p99_ms": p50 * 3, "degraded": 0,
            "model_s_per_search": 0.5, "store_hit_rate": None, "docs_embedded": 5,
            "model_ms_per_doc": None if rate16 is None else 45.0,
            "throughput": {} if rate16 is None else {"4": rate16, "16": rate16},
            "ndcg@10": 0.7, "test_queries": 3}


def test_the_page_gives_each_figure_and_no_verdict() -> None:
    engine = {"engine": "opensearch", "version": "2.19.1",
              "hybrid_linear": {"n": 5, "p50_ms": 100.0, "p95_ms": 150.0, "p99_ms": 160.0},
              "warm": {"written": 3, "stored": 2, "seconds": 1.0},
              "emptiest": quantiles([1500.0, 1700.0]),
              "ways": {"no-reuse": _way(2000.0, 0.5), "empty-store": _way(900.0, None),
                       "warm-store": _way(400.0, 1.0)},
              "same_rankings_as_no_reuse": {"empty-store": 3, "warm-store": 3},
              "same_rankings_of": 3}
    page = markdown({"command": "python -m es_tour.bench.cost", "date": "d", "machine": "m",
                     "stream": 10, "no_reuse_queries": 10,
                     "throughput_queries": 4,
                     "engines": [engine]})
    assert "| figure | measured |\n|---|---|\n" in page
    assert "| warm p50 against hybrid-linear's | 4.00× |" in page
    assert "| warm p50 | 400.00 ms |" in page
    assert "| empty-store p50 over the stream against no reuse's | 0.45× |" in page
    assert "| warm searches/s at 16 clients against no reuse's | 2.00× |" in page
    assert "| no reuse's model ms / doc embedded | 45.00 ms |" in page
    assert not re.search(r"\bmet\b|verdict|target", page)
    assert "| empty-store | 10 | 900 | 1800 | 2700 | – | – |" in page
    assert "its first 2 searches (the store at its emptiest): p50 1600 ms, 0.80× no" in page
    engine["ways"]["no-reuse"]["model_ms_per_doc"] = None  # it embedded no doc
    page = markdown({"command": "c", "date": "d", "machine": "m", "stream": 10,
                     "no_reuse_queries": 10, "throughput_queries": 4, "engines": [engine]})
    assert "| no reuse's model ms / doc embedded | – |" in page


def test_another_labelers_run_is_a_section_the_default_run_keeps(tmp_path) -> None:
    from es_tour.bench.cost import write_page

    engine = {"engine": "opensearch", "version": "2.19.1",
              "hybrid_linear": {"n": 5, "p50_ms": 60.0, "p95_ms": 80.0, "p99_ms": 90.0},
              "warm": {"written": 0, "stored": 10, "seconds": 1.0},
              "ways": {"warm-store": _way(140.0, 9.0)}}
    ensemble = {"command": "c --labeler e", "date": "d", "machine": "m", "stream": 10,
                "no_reuse_queries": 10, "throughput_queries": 4, "labeler": "a^1+b^0.25",
                "ways": ["warm-store"], "engines": [engine]}
    page = tmp_path / "cost.md"
    page.write_text("# What a refined search costs\n\nold default figures\n")
    write_page(page, ensemble)
    text = page.read_text()
    assert "old default figures" in text and "## With the labeler `a^1+b^0.25`" in text
    assert "### opensearch 2.19.1" in text and "| no-reuse |" not in text
    assert "| warm p50 against hybrid-linear's | 2.33× |" in text
    assert (tmp_path / "cost-a-1-b-0-25.json").is_file()
    write_page(page, ensemble)  # replaced, not added twice
    assert page.read_text().count("## With the labeler") == 1
    default = {**ensemble, "labeler": "default", "command": "c",
               "ways": ["no-reuse", "empty-store", "warm-store"],
               "engines": [{**engine, "emptiest": quantiles([1.0]),
                            "ways": {"no-reuse": _way(900.0, 1.0),
                                     "empty-store": _way(500.0, None),
                                     "warm-store": _way(120.0, 9.0)},
                            "same_rankings_as_no_reuse": {}, "same_rankings_of": 0}]}
    write_page(page, default)
    text = page.read_text()
    assert "old default figures" not in text and text.startswith("# What a refined search")
    assert text.count("## With the labeler `a^1+b^0.25`") == 1
    assert (tmp_path / "cost.json").is_file()
