"""BEIR-format datasets: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from es_tour.errors import ConfigError


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """What encoders and labelers read: title and body, as BEIR does."""
        return f"{self.title} {self.text}".strip()


# Metadata an application filters and facets on, which BEIR corpora lack: made up per doc,
# deterministically, so filtered workloads (bench-app, the filter tests) are reproducible.
METADATA_FIELDS = {"year": "integer", "topic": "keyword"}
TOPICS = ("biology", "chemistry", "medicine", "public-health", "genetics")
FIRST_YEAR, YEARS = 2000, 20


def synthetic_metadata(doc_id: str) -> dict[str, Any]:
    """`year` (FIRST_YEAR .. FIRST_YEAR + YEARS - 1) and `topic` (one of TOPICS) of a doc,
    from a CRC-32 of its id."""
    digest = zlib.crc32(doc_id.encode())
    return {"year": FIRST_YEAR + digest % YEARS, "topic": TOPICS[digest // YEARS % len(TOPICS)]}


@dataclass(frozen=True)
class BeirSplit:
    """One split held in memory, in corpus order: what offline training and corpus
    evaluation iterate over many times."""

    corpus_path: Path
    doc_ids: list[str]
    doc_texts: list[str]  # Document.contents
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]


QRELS_COLUMNS = ("query-id", "corpus-id", "score")


class BeirDataset:
    """A BEIR directory, read lazily; nothing is copied."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(f"{self.root} is not a directory (a BEIR dataset is one)")
        if not any((self.root / name).is_file() for name in ("corpus.jsonl", "queries.jsonl")):
            raise ConfigError(f"{self.root} is not a BEIR dataset: it has neither corpus.jsonl "
                              "nor queries.jsonl")
        self.name = self.root.name

    def corpus(self) -> Iterator[Document]:
        """The docs. Judgements for an index es-tour did not make (queries.jsonl and qrels/
        naming its doc ids) need none: eval and tune search that index as it is."""
        for row in _json_lines(self.root / "corpus.jsonl", ("_id",)):
            yield Document(str(row["_id"]), row.get("title", ""), row.get("text", ""))

    def queries(self, split: str | None = None) -> dict[str, str]:
        """Query id -> text; with a split, only the queries judged in it."""
        queries = {str(row["_id"]): row["text"]
                   for row in _json_lines(self.root / "queries.jsonl", ("_id", "text"))}
        if split is None:
            return queries
        judged = self.qrels(split)
        return {qid: text for qid, text in queries.items() if qid in judged}

    def qrels(self, split: str) -> dict[str, dict[str, int]]:
        """Query id -> {doc id: relevance} for `split` (train, dev or test)."""
        path = self.root / "qrels" / f"{split}.tsv"
        if not path.is_file():
            available = sorted(p.stem for p in (self.root / "qrels").glob("*.tsv"))
            raise ConfigError(f"no qrels for split [{split}]; available: {available}")
        qrels: dict[str, dict[str, int]] = {}
        with path.open() as tsv:
            rows = csv.DictReader(tsv, delimiter="\t")
            if not set(QRELS_COLUMNS) <= set(rows.fieldnames or ()):
                raise ConfigError(f"{path} must have the columns {list(QRELS_COLUMNS)}, got "
                                  f"{rows.fieldnames}")
            for row in rows:
                try:
                    score = int(row["score"])
                except (TypeError, ValueError):
                    raise ConfigError(f"{path} line {rows.line_num}: score {row['score']!r} is "
                                      "not an integer") from None
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = score
        return qrels

    def split(self, split: str) -> BeirSplit:
        """The whole corpus with the queries judged in `split` and their qrels."""
        docs = list(self.corpus())
        queries = self.queries(split)
        return BeirSplit(
            self.root / "corpus.jsonl",
            [doc.id for doc in docs],
            [doc.contents for doc in docs],
            list(queries),
            list(queries.values()),
            self.qrels(split),
        )


def _json_lines(path: Path, required: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a .jsonl file; a ConfigError names the file and line of the
    first that is missing, not JSON or lacks a `required` key."""
    if not path.is_file():
        raise ConfigError(f"{path} is missing")
    with path.open() as lines:
        for number, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path} line {number} is not JSON: {exc}") from None
            if not isinstance(row, dict) or any(key not in row for key in required):
                raise ConfigError(f"{path} line {number} must be an object with {list(required)}")
            yield row
