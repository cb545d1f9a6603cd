"""Parity figures for manifests, measured through the runtime itself (no torch here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from es_tour.models._runtime import CrossEncoder, DualEncoder
from es_tour.training._samples import PARITY_DOCS, PARITY_QUERIES, PARITY_TEXTS


def parity_pairs() -> list[tuple[str, str]]:
    """Every sample query against every sample doc: (len(Q) * len(D)) pairs."""
    return [(q, d) for q in PARITY_QUERIES for d in PARITY_DOCS]


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a, b: (n, d) -> (n,) cosine of each row of a with the same row of b."""
    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.asarray(num / np.clip(den, 1e-12, None))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """a, b: (n,) -> Spearman rank correlation (average ranks for ties)."""
    return float(np.corrcoef(rank_average(a), rank_average(b))[0, 1])


def rank_average(x: np.ndarray) -> np.ndarray:
    """x: (n,) -> (n,) float64 ranks starting at 1, ties sharing their average rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse = np.unique(x, return_inverse=True)
    return (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]


def dual_parity(
    directory: Path, reference: np.ndarray | None, precisions: list[str]
) -> dict[str, Any]:
    """Cosines of the ONNX embeddings of PARITY_TEXTS against `reference` (n, d) for fp32,
    against fp32 for int8, and of one-text batches against length-sorted padded batches."""
    out: dict[str, Any] = {}
    fp32 = DualEncoder(directory, "fp32")
    embedded = fp32.encode(list(PARITY_TEXTS))
    if reference is not None:
        cos = row_cosines(embedded, reference)
        out["fp32"] = {
            "reference": "pytorch",
            "texts": len(PARITY_TEXTS),
            "cosine_min": round(float(cos.min()), 6),
            "max_abs_diff": float(np.abs(embedded - reference).max()),
        }
    one_by_one = np.vstack([fp32.encode([t]) for t in PARITY_TEXTS])
    out["padding"] = {
        "reference": "unpadded single-text batches",
        "texts": len(PARITY_TEXTS),
        "cosine_min": round(float(row_cosines(embedded, one_by_one).min()), 6),
    }
    if "int8" in precisions:
        quantized = DualEncoder(directory, "int8").encode(list(PARITY_TEXTS))
        out["int8"] = {
            "reference": "fp32",
            "texts": len(PARITY_TEXTS),
            "cosine_min": round(float(row_cosines(quantized, embedded).min()), 6),
        }
    return out


def cross_parity(
    directory: Path, reference: np.ndarray | None, precisions: list[str]
) -> dict[str, Any]:
    """Max abs difference of ONNX scores on parity_pairs() against `reference` (n,) for
    fp32 and against fp32 for int8 (plus Spearman)."""
    out: dict[str, Any] = {}
    pairs = parity_pairs()
    scores = CrossEncoder(directory, "fp32").predict(pairs)
    if reference is not None:
        out["fp32"] = {
            "reference": "pytorch",
            "pairs": len(pairs),
            "max_abs_diff": float(np.abs(scores - reference).max()),
        }
    if "int8" in precisions:
        quantized = CrossEncoder(directory, "int8").predict(pairs)
        out["int8"] = {
            "reference": "fp32",
            "pairs": len(pairs),
            "max_abs_diff": float(np.abs(quantized - scores).max()),
            "spearman": round(spearman(quantized, scores), 6),
        }
    return out
