"""Model speed, PyTorch against ONNX: cross-encoder pairs/s and dual-encoder texts/s.

    python -m es_tour.bench.models --output docs/benchmarks/models.md \\
        --json docs/benchmarks/models.json

Every backend scores the same real SciFact (query, doc) pairs in the same batches, with
tokenisation included, so padding is alike. Backends take turns batch by batch, in a
rotating order, and the median of three passes is reported, so drifts in machine load hit
all of them alike. The cross-encoder is `make reranker`'s output when built (its PyTorch
checkpoint is kept beside the ONNX files); otherwise all-MiniLM-L6-v2 with an untrained
one-logit head, exported the same way: speed does not depend on the head's weights.
`--smoke` runs tiny sizes, to check the pipeline works.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.bench._commands import portable_command, portable_path
from es_tour.bench._machine import machine, now
from es_tour.datasets import BeirDataset
from es_tour.models import CrossEncoder, DualEncoder, model_path, read_manifest
from es_tour.paths import models_dir
from es_tour.training._parity import spearman
from es_tour.training._reranker import DEFAULT_BASE, PYTORCH_DIR, TrainOptions, export_reranker
from onnx_models import RETRIEVER, spec

DEFAULT_DATASET = Path(os.environ.get("ES_TOUR_DATASETS", "../shared/datasets")) / "scifact"
DUAL_BATCH = 32  # the runtime's default batch


@dataclass(frozen=True)
class Sizes:
    """How much work each measurement does."""

    rounds: int
    cross_pairs: dict[int, int]  # batch size -> pairs scored per round
    dual_texts: int


FULL = Sizes(rounds=3, cross_pairs={1: 24, 16: 64, 64: 128}, dual_texts=64)
SMOKE = Sizes(rounds=1, cross_pairs={1: 2, 16: 16, 64: 64}, dual_texts=8)


def run(
    smoke: bool = False,
    dataset: Path = DEFAULT_DATASET,
    reranker: Path | None = None,
    threads: int | None = 1,
) -> dict[str, Any]:
    """Measure both encoder kinds; returns what `render_markdown` and --json show.

    `reranker`: a directory written by `es-tour train-reranker` (default: the model
    cache's scifact-reranker when built). `threads`: for torch and onnxruntime alike;
    one by default, since on a shared two-core machine all-core runs measure contention
    (spinning thread pools) more than the libraries; None keeps each library's default.
    """
    import onnxruntime
    import torch
    import transformers

    sizes = SMOKE if smoke else FULL
    if threads is not None:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    data = BeirDataset(dataset).split("train")
    with tempfile.TemporaryDirectory(prefix="es-tour-bench-") as tmp:
        reranker, described = _cross_model(reranker, Path(tmp))
        cross = _bench_cross(reranker, data, sizes, threads)
        cross["model"] = described
        dual = _bench_dual(data, sizes, Path(tmp), threads)
    return {
        "date": now(),
        "machine": machine(),
        "smoke": smoke,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "onnxruntime": onnxruntime.__version__},
        "threads": {"torch": torch.get_num_threads(),
                    "onnxruntime": threads or "all cores (its default)"},
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "rounds": sizes.rounds,
        "cross": cross,
        "dual": dual,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _cross_model(reranker: Path | None, scratch: Path) -> tuple[Path, str]:
    """The cross model directory to time, and how to describe it."""
    built = models_dir() / "scifact-reranker"
    chosen = reranker or (built if (built / PYTORCH_DIR).is_dir() else None)
    if chosen is not None:
        return chosen, f"fine-tuned reranker {chosen.name} ({portable_path(chosen)})"
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = spec(DEFAULT_BASE).pytorch_source.fetch(scratch / "source")
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    out = scratch / "untrained-cross"
    export_reranker(model.eval(), tokenizer, out, TrainOptions().max_length, "bench")
    return out, "all-MiniLM-L6-v2 with an untrained one-logit head (no fine-tuned reranker built)"


def _pairs(data: Any, count: int) -> list[tuple[str, str]]:
    """`count` real pairs, 16 a query: its judged docs, then seeded random corpus docs."""
    rng = random.Random(0)
    texts = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    pairs: list[tuple[str, str]] = []
    for qid, query in zip(data.query_ids, data.query_texts, strict=True):
        docs = [texts[d] for d in data.qrels[qid] if d in texts]
        docs += rng.sample(data.doc_texts, max(0, 16 - len(docs)))
        pairs += [(query, d) for d in docs[:16]]
        if len(pairs) >= count:
            return pairs[:count]
    return pairs


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _bench_cross(
    directory: Path, data: Any, sizes: Sizes, threads: int | None
) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    max_length = read_manifest(directory).max_length
    checkpoint = directory / PYTORCH_DIR
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).eval()

    def pytorch(batch: Sequence[tuple[str, str]]) -> None:
        with torch.no_grad():
            encoded = tokenizer([q for q, _ in batch], [d for _, d in batch], padding=True,
                                truncation=True, max_length=max_length, return_tensors="pt")
            model(**encoded)

    rates: dict[str, dict[int, float]] = {"pytorch_fp32": {}, "onnx_fp32": {}, "onnx_int8": {}}
    for batch_size, count in sizes.cross_pairs.items():
        batches = _batches(_pairs(data, count), batch_size)
        fp32 = CrossEncoder(directory, "fp32", threads, batch_size)
        int8 = CrossEncoder(directory, "int8", threads, batch_size)
        measured = _interleaved({
            "pytorch_fp32": pytorch, "onnx_fp32": fp32.predict, "onnx_int8": int8.predict,
        }, batches, sizes.rounds)
        for name, rate in measured.items():
            rates[name][batch_size] = rate
    pairs = _pairs(data, max(sizes.cross_pairs.values()))
    fp32_scores = CrossEncoder(directory, "fp32", threads).predict(pairs)
    int8_scores = CrossEncoder(directory, "int8", threads).predict(pairs)
    per_query = [spearman(int8_scores[i : i + 16], fp32_scores[i : i + 16])
                 for i in range(0, len(pairs) - 15, 16)]
    return {
        "max_length": max_length,
        "pairs": sizes.cross_pairs,
        "pairs_per_s": rates,
        "ratios": {name: {b: rates[name][b] / rates["pytorch_fp32"][b] for b in rates[name]}
                   for name in ("onnx_fp32", "onnx_int8")},
        "int8_vs_fp32": {"pairs": len(pairs), "spearman": spearman(int8_scores, fp32_scores),
                         "spearman_min_per_query": min(per_query, default=float("nan")),
                         "max_abs_diff": float(np.abs(int8_scores - fp32_scores).max())},
    }


def _bench_dual(
    data: Any, sizes: Sizes, scratch: Path, threads: int | None
) -> dict[str, Any]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    directory = model_path(RETRIEVER)
    max_length = read_manifest(directory).max_length
    source = spec(RETRIEVER).pytorch_source.fetch(scratch / "retriever")
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModel.from_pretrained(str(source)).eval()

    def pytorch(batch: Sequence[str]) -> None:
        # mean pooling and L2 normalisation, as sentence-transformers and the runtime do
        with torch.no_grad():
            encoded = tokenizer(list(batch), padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")
            hidden = model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            torch.nn.functional.normalize(pooled, dim=1)

    fp32, int8 = DualEncoder(directory, "fp32", threads), DualEncoder(directory, "int8", threads)
    batches = _batches(data.doc_texts[: sizes.dual_texts], DUAL_BATCH)
    rates = _interleaved({"pytorch_fp32": pytorch, "onnx_fp32": fp32.encode_docs,
                          "onnx_int8": int8.encode_docs}, batches, sizes.rounds)
    return {
        "model": f"{RETRIEVER} (all-MiniLM-L6-v2), SciFact docs",
        "max_length": max_length,
        "batch": DUAL_BATCH,
        "texts": sizes.dual_texts,
        "texts_per_s": rates,
        "ratios": {name: rates[name] / rates["pytorch_fp32"] for name in ("onnx_fp32",
                                                                         "onnx_int8")},
    }


def _interleaved(
    backends: dict[str, Callable[[Any], Any]], batches: Sequence[Any], rounds: int
) -> dict[str, float]:
    """name -> items/s over `rounds` passes over `batches`: the median pass's time.

    Backends take turns batch by batch, in an order that rotates with every batch, so a
    drift in machine load lasting more than a few batches hits them all alike. Each runs
    one untimed item first.
    """
    for backend in backends.values():
        backend(batches[0][:1])
    items = sum(len(b) for b in batches)
    names = list(backends)
    seconds = {name: [0.0] * rounds for name in names}
    turn = 0
    for round_ in range(rounds):
        for batch in batches:
            for name in names[turn % len(names):] + names[: turn % len(names)]:
                started = time.perf_counter()
                backends[name](batch)
                seconds[name][round_] += time.perf_counter() - started
            turn += 1
    return {name: items / statistics.median(times) for name, times in seconds.items()}


def render_markdown(result: dict[str, Any]) -> str:
    """The tables of `run`'s result, with command, date, machine and versions."""
    cross, dual = result["cross"], result["dual"]
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    batch_sizes = list(cross["pairs"])
    lines = [
        "# Model speed: PyTorch against ONNX",
        "",
        f"`{result.get('command', 'make bench-models')}`"
        + (" (**smoke run: tiny sizes, not figures to quote**)" if result["smoke"] else ""),
        "",
        f"{result['date']}; {result['machine']}; {versions}; threads: torch "
        f"{result['threads']['torch']}, onnxruntime {result['threads']['onnxruntime']}; "
        f"load average {result['load_average'][0]} before, {result['load_average'][1]} after; "
        f"{result['seconds']:.0f} s in all.",
        "",
        "Same pairs, same batches, tokenisation included; backends take turns batch by batch "
        f"in a rotating order; median of {result['rounds']} passes.",
        "",
        f"## Cross-encoder pairs/s ({cross['model']}, max_length {cross['max_length']})",
        "",
        "| backend | " + " | ".join(f"batch {b}" for b in batch_sizes) + " |",
        "|---|" + "---|" * len(batch_sizes),
        *(f"| {name} | " + " | ".join(f"{rates[b]:.1f}" for b in batch_sizes) + " |"
          for name, rates in cross["pairs_per_s"].items()),
        *(f"| {name} / pytorch_fp32 | " + " | ".join(f"{r[b]:.2f}×" for b in batch_sizes)
          + " |" for name, r in cross["ratios"].items()),
        "",
        "Pairs per round: " + ", ".join(f"{n} at batch {b}" for b, n in cross["pairs"].items())
        + ". int8 against fp32 on {pairs} pairs (16 docs a query): Spearman {spearman:.4f}, "
        "lowest per query {spearman_min_per_query:.4f}, max abs diff {max_abs_diff:.4f}."
        .format(**cross["int8_vs_fp32"]),
        "",
        f"## Dual-encoder texts/s ({dual['model']}, max_length {dual['max_length']}, "
        f"batch {dual['batch']}, {dual['texts']} texts a round)",
        "",
        "| backend | texts/s | / pytorch_fp32 |",
        "|---|---|---|",
        *(f"| {name} | {rate:.1f} | {rate / dual['texts_per_s']['pytorch_fp32']:.2f}× |"
          for name, rate in dual["texts_per_s"].items()),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--reranker", type=Path, default=None,
                        help="a train-reranker output (default: the model cache's, if built)")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/models.md"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for torch and onnxruntime alike (default 1)")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.smoke, args.dataset, args.reranker, args.threads)
    given = sys.argv[1:] if argv is None else argv
    result["command"] = portable_command("python -m es_tour.bench.models", given)
    text = render_markdown(result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
