"""Choose the offline labeler: exact dense search over a BEIR corpus, scored by nDCG@10.

Corpus embeddings are cached in `<model dir>/cache/`, keyed by the model file's sha256,
precision, max_length, doc prefix and the corpus file's path, size and mtime.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from es_tour.errors import ConfigError
from es_tour.models._manifest import CACHE
from es_tour.models._runtime import DualEncoder

SPLITS = ("train", "dev", "test")
TOP_K = 100


@dataclass(frozen=True)
class BeirSplit:
    """A BEIR dataset split: the whole corpus, the judged queries, their qrels."""

    corpus_path: Path
    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Evaluation:
    """nDCG@10 of one model on one split; docs_per_s is the corpus encoding rate."""

    model: str
    split: str
    precision: str
    ndcg_at_10: float
    queries: int
    docs: int
    docs_per_s: float


def load_beir(dataset: str | Path, split: str) -> BeirSplit:
    """corpus.jsonl (title + " " + text), queries.jsonl and qrels/<split>.tsv of `dataset`."""
    if split not in SPLITS:
        raise ConfigError(f"split [{split}] is not one of {list(SPLITS)}")
    root = Path(dataset)
    corpus_path = root / "corpus.jsonl"
    qrels_path = root / "qrels" / f"{split}.tsv"
    for needed in (corpus_path, root / "queries.jsonl", qrels_path):
        if not needed.is_file():
            raise ConfigError(f"[{needed}] not found; expected a BEIR dataset directory")
    doc_ids, doc_texts = [], []
    with corpus_path.open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            doc_ids.append(str(doc["_id"]))
            doc_texts.append(f"{doc.get('title', '')} {doc['text']}".strip())
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as fh:
        next(fh)  # header: query-id corpus-id score
        for line in fh:
            qid, did, rel = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(rel)
    queries = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries[str(q["_id"])] = q["text"]
    return BeirSplit(
        corpus_path, doc_ids, doc_texts, list(queries), list(queries.values()), qrels
    )


def corpus_embeddings(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> tuple[np.ndarray, float]:
    """texts: the n docs of `corpus_path` -> ((n, d) float32, docs per second).

    Loaded from `<model dir>/cache/` when present; the rate is the one measured when the
    embeddings were computed.
    """
    cached = cached_corpus_embeddings(encoder, corpus_path, texts)
    if cached is not None:
        return cached
    vectors, meta = _cache_files(encoder, corpus_path, texts)
    started = time.perf_counter()
    embedded = encoder.encode_docs(texts)
    rate = len(texts) / max(time.perf_counter() - started, 1e-9)
    vectors.parent.mkdir(exist_ok=True)
    np.save(vectors, embedded)
    meta.write_text(json.dumps({"docs": len(texts), "docs_per_s": rate}))
    return embedded, rate


def cached_corpus_embeddings(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> tuple[np.ndarray, float] | None:
    """What `corpus_embeddings` returns when it is cached, else None (nothing is encoded)."""
    vectors, meta = _cache_files(encoder, corpus_path, texts)
    if vectors.is_file() and meta.is_file():
        return np.load(vectors), float(json.loads(meta.read_text())["docs_per_s"])
    return None


def _cache_files(
    encoder: DualEncoder, corpus_path: Path, texts: Sequence[str]
) -> tuple[Path, Path]:
    """The (.npy vectors, .json facts) cache files of `encoder` over `corpus_path`."""
    stat = corpus_path.stat()
    m = encoder.manifest
    key = hashlib.sha256(
        json.dumps([
            m.files[m.models[encoder.precision]], encoder.precision, m.max_length,
            encoder.doc_prefix, m.pooling, m.normalize, str(corpus_path.resolve()), stat.st_size,
            stat.st_mtime_ns, len(texts),
        ]).encode()
    ).hexdigest()[:20]
    cache = encoder.path / CACHE
    return cache / f"corpus-{key}.npy", cache / f"corpus-{key}.json"


def exact_search(
    queries: np.ndarray, docs: np.ndarray, k: int = TOP_K
) -> tuple[np.ndarray, np.ndarray]:
    """queries: (q, d), docs: (n, d) -> (rows (q, k) int, scores (q, k) float32), best first."""
    scores = queries @ docs.T
    k = min(k, docs.shape[0])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top_scores = np.take_along_axis(scores, top, axis=1)
    order = np.argsort(-top_scores, axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1), np.take_along_axis(top_scores, order, axis=1)


def ndcg_at_10(
    data: BeirSplit, rows: np.ndarray, scores: np.ndarray
) -> float:
    """rows, scores: (q, k) results in data.query_ids order -> mean nDCG@10 (ir_measures)."""
    return run_ndcg_at_10(data, {
        qid: {data.doc_ids[r]: float(s) for r, s in zip(rs, ss, strict=True)}
        for qid, rs, ss in zip(data.query_ids, rows, scores, strict=True)
    })


def run_ndcg_at_10(data: BeirSplit, run: Mapping[str, Mapping[str, float]]) -> float:
    """run: query id -> {doc id: score} -> mean nDCG@10 over the run's queries (ir_measures;
    a query with no docs scores 0)."""
    import ir_measures
    from ir_measures import nDCG

    qrels = [
        ir_measures.Qrel(qid, did, rel)
        for qid in run
        for did, rel in data.qrels[qid].items()
    ]
    scored = [
        ir_measures.ScoredDoc(qid, did, score)
        for qid, docs in run.items()
        for did, score in docs.items()
    ]
    return float(ir_measures.calc_aggregate([nDCG @ 10], qrels, scored)[nDCG @ 10])


def evaluate(
    encoder: DualEncoder, data: BeirSplit, split: str, name: str | None = None
) -> Evaluation:
    """Exact search of data's queries over its whole corpus with `encoder`."""
    docs, rate = corpus_embeddings(encoder, data.corpus_path, data.doc_texts)
    queries = encoder.encode_queries(data.query_texts)
    rows, scores = exact_search(queries, docs)
    return Evaluation(
        model=name or encoder.manifest.name or encoder.path.name,
        split=split,
        precision=encoder.precision,
        ndcg_at_10=round(ndcg_at_10(data, rows, scores), 4),
        queries=len(data.query_ids),
        docs=len(data.doc_ids),
        docs_per_s=round(rate, 1),
    )
