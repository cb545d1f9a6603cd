"""`evaluate(concurrency=N)`: a quality run's queries N at a time, with the results of one
at a time; timed runs (cold labels) stay one at a time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from es_tour.datasets import BeirDataset
from es_tour.engines import Hit
from es_tour.errors import ConfigError
from es_tour.evaluation import MethodSpec, evaluate

DOCS = [f"d{i}" for i in range(30)]
QUERIES = {f"q{i}": f"query {i}" for i in range(12)}


class SlowEngine:
    """kNN whose order depends on the query vector's first value; counts calls in flight."""

    name = "slow"

    def __init__(self) -> None:
        self.in_flight = 0
        self.most_in_flight = 0

    async def knn(self, index, vector, k, **options):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        shift = int(abs(vector[0]) * 1000) % len(DOCS)
        order = DOCS[shift:] + DOCS[:shift]
        return [Hit(doc, 1.0 - rank / 100, {"title": doc}) for rank, doc in enumerate(order[:k])]


class PerQueryEncoder:
    """A different unit vector for each query text."""

    def encode_queries(self, texts):
        seeds = [sum(map(ord, text)) for text in texts]
        vectors = np.array([np.random.default_rng(s).normal(size=4) for s in seeds])
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def dataset(tmp_path: Path) -> BeirDataset:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in QUERIES.items()))
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{qid}\td{n}\t1\n" for n, qid in enumerate(QUERIES)))
    return BeirDataset(tmp_path)


async def test_queries_run_n_at_a_time_with_the_results_of_one_at_a_time(
        fake_context, dataset: BeirDataset) -> None:
    reports = {}
    for concurrency in (1, 4):
        context = fake_context(SlowEngine(), np.zeros(4), {})
        context.encoder = PerQueryEncoder()
        (reports[concurrency],) = await evaluate(context, dataset, [MethodSpec("knn", "knn")],
                                                 cold_labels=False, concurrency=concurrency)
        assert context.engine.most_in_flight == concurrency
    one, four = reports[1], reports[4]
    assert list(four.results) == list(QUERIES)
    assert {qid: [h.id for h in r.hits] for qid, r in four.results.items()} == \
        {qid: [h.id for h in r.hits] for qid, r in one.results.items()}
    assert four.metrics == one.metrics and 0 < one.metrics["ndcg@10"] < 1


@pytest.mark.parametrize(("cold_labels", "concurrency"), [(True, 4), (False, 0)])
async def test_timed_runs_stay_one_at_a_time(fake_context, dataset: BeirDataset,
                                             cold_labels: bool, concurrency: int) -> None:
    context = fake_context(SlowEngine(), np.ones(4), {})
    with pytest.raises(ConfigError, match="concurrency"):
        await evaluate(context, dataset, [MethodSpec("knn", "knn")], cold_labels=cold_labels,
                       concurrency=concurrency)
