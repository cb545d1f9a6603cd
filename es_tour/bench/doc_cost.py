"""ms per new doc: what the default labeler's model costs to embed one doc the store lacks,
at each doc max_length, on this machine, with no engine.

A fixed sample of SciFact corpus docs is embedded at the labeler's precision and batch size
(int8, one doc a model run, as in the sidecar), the lengths interleaved and each pass
repeated, and the median pass taken, all in one run. `--threads` caps the model's threads
(default: the runtime's, one per core); pin the process to cores with `taskset` to
measure a slice of a larger machine. The machine line names the CPU's int8 instructions
(VNNI, or AVX2 alone), which an int8 model's speed hangs on (docs/models.md).

    python -m es_tour.bench.doc_cost --dataset ../shared/datasets/scifact
    taskset -c 0,1 python -m es_tour.bench.doc_cost --dataset ../shared/datasets/scifact --threads 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from es_tour.bench._commands import portable_command
from es_tour.bench._machine import machine, now
from es_tour.datasets import BeirDataset
from es_tour.models import DualEncoder, labeler_encoder
from onnx_models import spec

LENGTHS = (512, 384, 256)
SAMPLE_DOCS, REPEATS, SEED = 96, 7, 7


def sample_texts(dataset: BeirDataset) -> list[str]:
    """The fixed sample of corpus docs every timing run embeds."""
    return random.Random(SEED).sample([doc.contents for doc in dataset.corpus()], SAMPLE_DOCS)


def ms_per_doc(encoders: Mapping[int, DualEncoder], texts: Sequence[str],
               repeats: int = REPEATS) -> dict[int, float]:
    """length -> median ms per doc over `repeats` interleaved passes over `texts`, embedded
    by that length's encoder."""
    for encoder in encoders.values():  # the first run of a session pays its set-up
        encoder.encode_docs(texts[:2])
    passes: dict[int, list[float]] = {n: [] for n in encoders}
    for _ in range(repeats):
        for n, encoder in encoders.items():
            started = time.perf_counter()
            encoder.encode_docs(texts)
            passes[n].append((time.perf_counter() - started) * 1000 / len(texts))
    return {n: statistics.median(times) for n, times in passes.items()}


def measure(dataset: BeirDataset, threads: int | None = None,
            repeats: int = REPEATS) -> dict[str, Any]:
    """ms per new doc at each of LENGTHS, with how it was measured."""
    encoders = {n: labeler_encoder("default", n, threads=threads) for n in LENGTHS}
    encoder = encoders[max(LENGTHS)]
    return {"date": now(), "machine": machine(), "labeler": spec("default").name,
            "precision": encoder.precision, "providers": encoder.providers,
            "batch": encoder.batch_size, "threads": threads, "sample_docs": SAMPLE_DOCS,
            "repeats": repeats,
            "ms_per_doc": ms_per_doc(encoders, sample_texts(dataset), repeats)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=None,
                        help="the model's threads (default: one per core)")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help="passes over the sample per length; the median is kept")
    args = parser.parse_args(argv)
    result = measure(BeirDataset(args.dataset), args.threads, args.repeats)
    result["command"] = portable_command("python -m es_tour.bench.doc_cost",
                                         sys.argv[1:] if argv is None else argv)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
