"""Corpus embeddings of a dual encoder, computed once per collection and cached.

They live in `<model dir>/cache/`, keyed by the model file's sha256, precision,
max_length, doc prefix and the corpus file's content (its sha256).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from es_tour.models._manifest import CACHE
from es_tour.models._runtime import DualEncoder, l2_normalize


def corpus_embeddings(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, float]:
    """texts: the n docs of `corpus_path` -> ((n, d) float32, docs per second).

    Loaded from `<model dir>/cache/` when present; the rate is the one measured when the
    embeddings were computed. `on_batch` is told the docs of each batch encoded.
    """
    cached = cached_corpus_embeddings(encoder, corpus_path, texts)
    if cached is not None:
        return cached
    vectors, meta = _cache_files(encoder, corpus_path, texts)
    started = time.perf_counter()
    embedded = encoder.for_corpus().encode_docs(texts, on_batch)
    rate = len(texts) / max(time.perf_counter() - started, 1e-9)
    vectors.parent.mkdir(exist_ok=True)
    np.save(vectors, embedded)
    meta.write_text(json.dumps({"docs": len(texts), "docs_per_s": rate}))
    return embedded, rate


def unit_corpus_embeddings(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> np.ndarray:
    """`corpus_embeddings` as float32 unit rows: the doc vectors a dual-encoder labeler's
    cosine φ uses."""
    return l2_normalize(corpus_embeddings(encoder, corpus_path, texts)[0])


def cached_corpus_embeddings(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> tuple[np.ndarray, float] | None:
    """What `corpus_embeddings` returns when it is cached, else None (nothing is encoded)."""
    if not has_corpus_embeddings(encoder, corpus_path, texts):
        return None
    vectors, meta = _cache_files(encoder, corpus_path, texts)
    return np.load(vectors), float(json.loads(meta.read_text())["docs_per_s"])


def has_corpus_embeddings(encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]) -> bool:
    """Whether `corpus_embeddings` would load its vectors rather than encode them."""
    return all(path.is_file() for path in _cache_files(encoder, corpus_path, texts))


def _cache_files(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> tuple[Path, Path]:
    """The (.npy vectors, .json facts) cache files of `encoder` over `corpus_path`."""
    key = hashlib.sha256(json.dumps(
        [*encoder.doc_encoding, _content_digest(corpus_path), len(texts)]).encode()
    ).hexdigest()[:20]
    cache = encoder.path / CACHE
    return cache / f"corpus-{key}.npy", cache / f"corpus-{key}.json"


def _content_digest(path: Path) -> str:
    """The file's SHA-256, so a copy, a fresh checkout or a remount of the same corpus finds
    its vectors (a stat would not); hashed once per (path, size, mtime) in a process."""
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
