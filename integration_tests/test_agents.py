"""Hybrid search agents on the real OpenSearch over SciFact test queries.

The labeler is the default labeler (never the retriever: when φ is the retriever's own
score, kNN's top-k already is φ's top-k and no refinement can change A_t), reading the
corpus vectors the model caches on first use.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from es_tour.agents import CorpusLabeler, policy_dir
from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.evaluation import MethodSpec, evaluate
from es_tour.models import DualEncoder
from es_tour.pipeline import SearchContext
from es_tour.training import sample_queries, train_policy
from integration_tests.conftest import QUALITY_CONCURRENCY

SAMPLE, SEED = 100, 13  # test queries, fixed sample
# train queries the policy is cloned from: only about 1 in 20 has a Δq that raises
# nDCG@10, so 40 held one such query, too few to learn from. Measured 2026-11-26: from 150
# or 200, the learned agent scored 0.6873 against hre's 0.6861; from 100, 0.6845
TRAIN_QUERIES = 150
ACTS_ON = 3  # measured: the policy acted on 6 of the 100 and gained +0.0014 over hre
# "keeps up": the learned agent ties hre (docs/RESULTS.md, "The learned agent against
# HRE"), so on 100 queries the sign
# of their difference is noise: +0.0012 (0.6873 against 0.6861; 2026-11-26, int8 docs
# embedded in batches, a CPU with AVX2 alone), -0.0017 (0.6809 against 0.6825; 2026-11-27,
# one doc a model run, a CPU with VNNI). Within the 0.003 the project holds ties to.
TIE = 0.003
# test queries the oracle runs on, the sample's first: it measured 0.7159 against hre's
# 0.6861 on all 100
ORACLE_QUERIES = 40


@pytest.fixture
def policy_name(tmp_path: Path) -> Iterator[str]:
    """A registry name of the test's own (learned-agent takes names, never paths)."""
    name = f"it-{tmp_path.name}".lower()
    yield name
    shutil.rmtree(policy_dir(name), ignore_errors=True)


@pytest.fixture(scope="module")
def models(retriever: DualEncoder, corpus_labeler: CorpusLabeler
           ) -> tuple[DualEncoder, CorpusLabeler]:
    """The query encoder, and the default labeler over its cached corpus vectors."""
    return retriever, corpus_labeler


@pytest.mark.training  # oracle sessions on 150 train queries: 2.5 min on 2 cores
async def test_learned_agent_acts_and_keeps_up_with_hre_and_the_oracle_beats_it(
    nodes: dict[str, NodeStatus], scifact: BeirDataset, scifact_index: str, policy_name: str,
    models: tuple[DualEncoder, CorpusLabeler],
) -> None:
    encoder, labeler = models
    queries = sample_queries(scifact, "test", SAMPLE, SEED)
    async with connect("opensearch", nodes["opensearch"].url) as engine:
        # a policy of the test's own, cloned from oracle sessions on train queries only
        await train_policy(engine, scifact_index, scifact, "train", max_queries=TRAIN_QUERIES,
                           out=policy_dir(policy_name), encoder=encoder, labeler=labeler)
        context = SearchContext(engine, scifact_index, encoder, labeler)
        methods = [MethodSpec("hre", "hre"),
                   MethodSpec("learned-agent", "learned-agent", {"policy": policy_name})]
        reports = {report.spec.name: report for report in await evaluate(
            context, scifact, methods, split="test", query_ids=queries, cold_labels=False,
            concurrency=QUALITY_CONCURRENCY)}
        # the oracle, the costliest, on the first of them: its lead is wide
        oracle_queries = list(queries)[:ORACLE_QUERIES]
        (reports["oracle-agent"],) = await evaluate(
            context, scifact, [MethodSpec("oracle-agent", "oracle-agent")], split="test",
            query_ids=oracle_queries, cold_labels=False, concurrency=QUALITY_CONCURRENCY)
    ndcg = {name: report.metrics["ndcg@10"] for name, report in reports.items()}
    hre_where_oracle = reports["hre"].metrics_on(scifact.qrels("test"), oracle_queries)["ndcg@10"]
    engine_calls = {name: np.mean([r.engine_calls for r in report.results.values()])
                    for name, report in reports.items()}
    for name, report in reports.items():
        print(f"{name}: {report.summary()}, calls {engine_calls[name]:.1f}")
    acted = [r for r in reports["learned-agent"].results.values()
             if sum(t.newly_scored for t in r.rounds[1:])]
    assert len(acted) >= ACTS_ON, f"the learned policy acted on {len(acted)} of {SAMPLE}"
    assert ndcg["learned-agent"] >= ndcg["hre"] - TIE
    print(f"oracle-agent {ndcg['oracle-agent']:.4f} against hre {hre_where_oracle:.4f} on "
          f"{ORACLE_QUERIES}")
    assert ndcg["oracle-agent"] > hre_where_oracle
    # one BM25, the session's one kNN call (doc keys), and a search of the texts it labels
    assert 2 <= engine_calls["hre"] <= 3


async def test_tour_agent_moves_the_dense_query_and_labels_what_it_finds(
    nodes: dict[str, NodeStatus], scifact: BeirDataset, scifact_index: str,
    models: tuple[DualEncoder, CorpusLabeler],
) -> None:
    """On OpenSearch: the agent is one code path over the engine adapter (it measured the
    same on both engines), and test_sidecar_app runs tour-agent on both."""
    encoder, labeler = models
    queries = sample_queries(scifact, "test", SAMPLE, SEED)
    async with connect("opensearch", nodes["opensearch"].url) as engine:
        context = SearchContext(engine, scifact_index, encoder, labeler)
        reports = {report.spec.name: report for report in await evaluate(
            context, scifact, [MethodSpec("hre", "hre"), MethodSpec("tour-agent", "tour-agent")],
            split="test", query_ids=queries, cold_labels=False,
            concurrency=QUALITY_CONCURRENCY)}
    results = reports["tour-agent"].results.values()
    # every query takes the step, and the moved vector's kNN brings docs HRE never labelled
    assert all(r.rounds[0].chosen == "tour-step" and r.rounds[1].newly_scored > 0
               for r in results)
    hre_pairs = np.mean([r.pairs_scored for r in reports["hre"].results.values()])
    assert np.mean([r.pairs_scored for r in results]) == pytest.approx(hre_pairs + 10)
    # a step changes A_t only with docs φ rates above its last, which may not be relevant:
    # measured 0.6824 against hre's 0.6854 on these 100 on one 2-core machine, and 0.6756
    # against 0.6857 on another (its int8 kernels lack VNNI: other labels at the margin);
    # on all 300, +0.0002
    assert reports["tour-agent"].metrics["ndcg@10"] >= reports["hre"].metrics["ndcg@10"] - 0.02
