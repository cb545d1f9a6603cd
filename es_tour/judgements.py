"""Judgements (qrels) kept beside an index, so the playground can mark relevant hits.

`es-tour index --qrels` stores every split of a BEIR dataset's qrels in the side index
`<index>-qrels`: one record per (split, query) with the query's text, kept as a keyword
so it can be looked up exactly, and its judgements {doc id: relevance}, stored as given
(not indexed: doc ids are never field names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine
from es_tour.errors import EsTourError

QRELS_SUFFIX = "-qrels"
PROPERTIES = {
    "query": {"type": "keyword"},
    "query_id": {"type": "keyword"},
    "split": {"type": "keyword"},
    "judgements": {"type": "object", "enabled": False},
}


def qrels_index(index: str) -> str:
    """The side index that holds `index`'s judgements."""
    return f"{index}{QRELS_SUFFIX}"


@dataclass(frozen=True)
class QrelsReport:
    index: str  # the side index
    splits: tuple[str, ...]
    queries: int  # records stored: one per (split, query) with text


def qrels_records(dataset: BeirDataset) -> list[dict[str, Any]]:
    """One record per (split, judged query) of every qrels/<split>.tsv; `_id` is split:qid.
    Queries without text in queries.jsonl are left out."""
    texts = dataset.queries()
    records = []
    for split in splits(dataset):
        for qid, judged in dataset.qrels(split).items():
            if qid in texts:
                records.append({"_id": f"{split}:{qid}", "query": texts[qid].strip(),
                                "query_id": qid, "split": split, "judgements": dict(judged)})
    return records


def splits(dataset: BeirDataset) -> list[str]:
    return sorted(path.stem for path in (dataset.root / "qrels").glob("*.tsv"))


async def store_qrels(engine: ClientEngine, dataset: BeirDataset, index: str) -> QrelsReport:
    """Replace `qrels_index(index)` with the dataset's judgements, every split."""
    name = qrels_index(index)
    records = qrels_records(dataset)
    await engine.create_side_index(name, PROPERTIES, replace=True)
    report = await engine.bulk_index(name, records)
    if report.failed:
        raise EsTourError(f"{len(report.failed)} judgement records failed to index into "
                          f"[{name}]; first: {report.failed[0]}")
    await engine.refresh(name)
    return QrelsReport(name, tuple(splits(dataset)), len(records))
