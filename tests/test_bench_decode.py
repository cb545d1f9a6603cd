"""The decode benchmark's page (es_tour.bench.decode)."""

from __future__ import annotations

import json

from es_tour.bench.decode import markdown, median_ms


def test_the_page_gives_both_decoders_and_their_ratio():
    rows = [{"hits": 100, "bytes": 990494, "json_ms": 16.77, "orjson_ms": 2.6, "ratio": 6.5}]
    page = markdown(rows, "python -m es_tour.bench.decode")
    assert "| 100 | 990,494 | 16.77 | 2.60 | 6.5x |" in page
    assert "`python -m es_tour.bench.decode`" in page


def test_the_timing_runs_the_decoder_it_is_given():
    calls = []

    def decode(raw: bytes) -> object:
        calls.append(raw)
        return json.loads(raw)

    assert median_ms(decode, b'{"a": 1}') >= 0.0
    assert len(calls) > 1
