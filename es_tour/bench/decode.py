"""What reading an engine's answer costs the sidecar: a real kNN page with its vectors,
decoded by the json module and by the engine clients' serializer (orjson), side by side.

A refined search reads pages of hits with 384-d vectors in every round, so their decoding
is CPU the sidecar spends per search:

    python -m es_tour.bench.decode --url http://127.0.0.1:9200 --index scifact \\
        --output docs/benchmarks/decode.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import machine, now
from es_tour.engines._json import loads

SIZES = (10, 100)
ROUNDS, REPEATS = 20, 7


def page(url: str, index: str, size: int) -> bytes:
    """The raw answer to a search for `size` hits with their whole `_source` (vectors
    included), as the engine sends it."""
    response = httpx.post(f"{url}/{index}/_search", json={"size": size,
                                                         "query": {"match_all": {}}})
    response.raise_for_status()
    return response.content


def median_ms(decode: Callable[[bytes], Any], raw: bytes) -> float:
    """The median over REPEATS of the mean ms of ROUNDS decodes."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            decode(raw)
        times.append((time.perf_counter() - started) * 1000 / ROUNDS)
    return statistics.median(times)


def measure(url: str, index: str) -> list[dict[str, Any]]:
    rows = []
    for size in SIZES:
        raw = page(url, index, size)
        assert loads(raw) == json.loads(raw)  # the same answer either way
        stdlib, chosen = median_ms(json.loads, raw), median_ms(loads, raw)
        rows.append({"hits": size, "bytes": len(raw), "json_ms": round(stdlib, 2),
                     "orjson_ms": round(chosen, 2), "ratio": round(stdlib / chosen, 1)})
    return rows


def markdown(rows: Sequence[dict[str, Any]], command: str) -> str:
    lines = ["# Decoding an engine's answer", "",
             "Written by `python -m es_tour.bench.decode`; never edited by hand.", "",
             f"- command: `{command}`", f"- date: {now()}; machine: {machine()}",
             f"- a match_all page of the index with each hit's whole `_source` (its 384-d "
             f"vector included); median of {REPEATS} runs of {ROUNDS} decodes each, the two "
             "decoders in the same run", "",
             "| hits | bytes | json module ms | orjson ms (the clients') | json / orjson |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['hits']} | {r['bytes']:,} | {r['json_ms']:.2f} | {r['orjson_ms']:.2f} | "
              f"{r['ratio']:.1f}x |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:9200")
    parser.add_argument("--index", default="scifact")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/decode.md"))
    args = parser.parse_args(argv)
    command = portable_command("python -m es_tour.bench.decode",
                               sys.argv[1:] if argv is None else argv)
    args.output.write_text(markdown(measure(args.url, args.index), command))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
