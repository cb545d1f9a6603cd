"""Plain types shared by every engine adapter."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

Similarity = Literal["dot_product", "cosine"]
# what kNN hits carry: see ClientEngine.knn
KnnReturns = Literal["vectors", "text", "ids", "keys"]

# A doc named by its sequence number, not its `_id`: what a pool leg of a one-shard index
# returns, since loading each hit's `_id` is most of a search's cost (a stored field, about
# 0.14 ms a hit on two cores) while `_seq_no` is a doc value. Unique among the shard's live
# docs; `ClientEngine.doc_ids` gives the `_id`s of those a page shows.
DOC_KEY_PREFIX = "_seq_no:"


def doc_key(seq_no: int) -> str:
    return f"{DOC_KEY_PREFIX}{seq_no}"


def key_seq_no(doc: str) -> int | None:
    """The sequence number a doc key names; None for an `_id`."""
    if doc.startswith(DOC_KEY_PREFIX) and doc[len(DOC_KEY_PREFIX):].isdigit():
        return int(doc[len(DOC_KEY_PREFIX):])
    return None


@dataclass(frozen=True)
class IndexSpec:
    """What an es-tour index holds: text fields for BM25 and one HNSW vector field."""

    name: str
    dimension: int
    similarity: Similarity = "dot_product"  # dot_product expects unit-length vectors
    text_fields: tuple[str, ...] = ("title", "text")
    # Lucene's EnglishAnalyzer, as Anserini's BM25 baselines analyse; the es-tour plugin
    # registers it under this name on both engines
    text_analyzer: str = "tour_english"
    vector_field: str = "embedding"
    bm25_k1: float = 0.9  # the BEIR / Pyserini setting the papers use
    bm25_b: float = 0.4
    shards: int = 1
    # further fields and their engine types, e.g. (("year", "integer"), ("topic", "keyword"))
    metadata_fields: tuple[tuple[str, str], ...] = ()


# slots, not frozen: a refined search makes a thousand or more, and a frozen dataclass
# takes four times as long to make (3.0 against 0.7 µs here)
@dataclass(slots=True)
class Hit:
    """One search result; `vector` is the stored vector when the search returns it, `index`
    the concrete index that holds the doc (the engine's `_index`: behind an alias, the
    index it points to), None when not known."""

    id: str
    score: float
    source: Mapping[str, Any] = field(default_factory=dict)
    vector: np.ndarray | None = None
    index: str | None = None
    # the other retriever's score of the doc where a hybrid leg asked for it: its BM25 on a
    # kNN leg, its q·c on a BM25 leg (`ClientEngine.hybrid_legs`)
    other_score: float | None = None

    def rescored(self, score: float) -> Hit:
        """This hit with another score: `dataclasses.replace` costs twice as much, and a
        hybrid pool rescores a few hundred hits a round."""
        return Hit(self.id, score, self.source, self.vector, self.index, self.other_score)


@dataclass
class Overview:
    """What a request's own size-0 search would give (its total, as its `track_total_hits`
    asks), counted by the pool leg that runs the request's own query instead: `keys` are
    the request's counting keys the leg takes on, and `answer` the leg's whole answer once
    it came. The first leg that may count it sets `asked`."""

    keys: Mapping[str, Any]
    asked: bool = False
    answer: dict[str, Any] | None = None


@dataclass(frozen=True)
class VectorField:
    """What an index's mapping says of one vector field: its dimension (None until the
    engine has seen a vector), whether `_source` keeps its vectors, and its similarity."""

    name: str
    dimension: int | None
    in_source: bool
    # how its kNN compares vectors, where the mapping says and es-tour can script it
    similarity: Similarity | None = None


@dataclass(frozen=True)
class TermStats:
    """Term vectors of some docs with the index's own statistics, over the text fields.

    Terms are the index analyzer's tokens. `tf` sums a term's frequency over the fields;
    `df` is the largest per-field document frequency, `doc_count` the largest field's.
    """

    tf: Mapping[str, Mapping[str, int]]  # doc id -> term -> frequency in the doc
    df: Mapping[str, int]  # term -> docs of the index holding it
    doc_count: int

    def idf(self, term: str) -> float:
        """Lucene's BM25 idf, log(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.doc_count - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class BulkReport:
    indexed: int
    retried: int
    failed: list[dict[str, Any]]


class SearchEngine(Protocol):
    """One cluster behind the official client; callers never ask which engine it is. What
    a search calls for a caller needs only the `read` action group on the index: searches
    and single-doc term vectors (`docs_by_id`, `term_stats` and `analyzed_tokens` included)."""

    name: str

    async def create_index(self, spec: IndexSpec, *, replace: bool = False) -> bool: ...

    async def create_side_index(
        self, name: str, properties: Mapping[str, Any], *, replace: bool = False,
        hidden: bool = False,
    ) -> bool: ...

    async def bulk_index(
        self, index: str, docs: Iterable[Mapping[str, Any]], *, max_retries: int = 3
    ) -> BulkReport: ...

    async def bm25(
        self,
        index: str,
        text: str,
        k: int,
        *,
        fields: Sequence[str] = ("title", "text"),
        ids: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> list[Hit]: ...

    async def knn(
        self,
        index: str,
        vector: np.ndarray,
        k: int,
        *,
        num_candidates: int | None = None,
        field: str = "embedding",
        ids: Sequence[str] | None = None,
        returns: KnnReturns = "vectors",
    ) -> list[Hit]: ...

    async def bool_search(
        self,
        index: str,
        query: Mapping[str, Any],
        k: int,
        *,
        ids: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> list[Hit]: ...

    async def docs_by_id(self, index: str, ids: Sequence[str], *, exclude: Sequence[str] = ()
                         ) -> list[Hit]: ...

    async def settings(self, index: str) -> dict[str, Any]: ...

    async def put_settings(self, index: str, settings: Mapping[str, Any]) -> None: ...

    async def analyzed_tokens(self, index: str, text: str, *, field: str = "text"
                              ) -> list[str]: ...

    async def term_stats(
        self,
        index: str,
        ids: Sequence[str],
        *,
        fields: Sequence[str] = ("title", "text"),
    ) -> TermStats: ...

    async def count(self, index: str) -> int: ...

    async def refresh(self, index: str) -> None: ...

    async def delete_index(self, index: str) -> None: ...

    async def version(self) -> str: ...

    async def close(self) -> None: ...
