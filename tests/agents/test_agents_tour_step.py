"""TOUR's step as a policy action in the HRE, over a fake engine with exact kNN."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.agents import AGENTS, Environment, OraclePolicy, TourStep
from es_tour.engines import Hit, TermStats
from es_tour.errors import ConfigError
from es_tour.pipeline import SearchContext, Timings

rng = np.random.default_rng(5)
DOCS = rng.normal(size=(100, 8)).astype(np.float32)
DOCS /= np.linalg.norm(DOCS, axis=1, keepdims=True)
PHI = {f"d{i}": float(v) for i, v in enumerate(DOCS @ DOCS[:3].mean(axis=0))}
QUERY = (DOCS[50] + 0.5 * DOCS[:3].mean(axis=0)).astype(np.float32)


class FakeEngine:
    """Exact inner-product kNN; BM25 and every bool query return d90.. in order."""

    name = "fake"

    def __init__(self) -> None:
        self.knn_vectors: list[np.ndarray] = []
        self.mgets: list[tuple[str, ...]] = []

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.knn_vectors.append(np.asarray(vector))
        order = [i for i in np.argsort(-(DOCS @ vector), kind="stable")
                 if ids is None or f"d{i}" in ids][:k]
        return [Hit(f"d{i}", float(DOCS[i] @ vector),
                    {} if returns == "ids" else {"title": f"d{i}"},
                    DOCS[i] if returns == "vectors" else None) for i in order]

    async def bm25(self, index, text, k, *, fields, ids=None, exclude=()):
        return [_stored(f"d{i}", exclude) for i in range(90, 90 + min(k, 10))]

    async def bool_search(self, index, query, k, *, ids=None, exclude=()):
        return [_stored(f"d{i}", exclude) for i in range(90, 90 + min(k, 10))]

    async def mget(self, index, ids, *, exclude=()):
        self.mgets.append(tuple(ids))
        return [_stored(doc, exclude) for doc in ids]

    async def term_stats(self, index, ids, *, fields):
        return TermStats({doc: {} for doc in ids}, {}, 100)  # no terms: no Δq candidates

    async def analyze(self, index, text, *, field="text"):
        return text.lower().split()


def _stored(doc: str, exclude) -> Hit:
    source = {"title": doc}
    if "embedding" not in exclude:
        source["embedding"] = DOCS[int(doc[1:])].tolist()
    return Hit(doc, 1.0, source)


class Labeler:
    name = "phi"
    pairs_scored = 0

    def score(self, query, docs, index=""):
        return np.array([PHI[doc_id] for doc_id, _ in docs], dtype=np.float32)


class Encoder:
    def encode_queries(self, texts):
        return QUERY[None, :]


@pytest.fixture
def context() -> SearchContext:
    return SearchContext(FakeEngine(), "idx", Encoder(), Labeler())


async def test_a_tour_step_moves_the_vector_and_labels_its_new_knn_docs(context) -> None:
    env = Environment(context, k=5, top_k=20)
    start = await env.start("q", Timings())
    moved = await env.step(start, TourStep(), Timings())
    assert moved.query == start.query  # the Lucene query stays
    assert not np.allclose(moved.vector, start.vector)
    sent = context.engine.knn_vectors[-1]
    np.testing.assert_allclose(sent, moved.vector / np.linalg.norm(moved.vector), rtol=1e-5)
    new = [doc for doc in moved.phi if doc not in start.phi]
    assert new and list(moved.returned) == ["knn"] and len(new) <= 5
    # BM25's docs came without vectors and Top-K as ids: their vectors are read once
    assert context.engine.mgets[-1] == tuple(start.phi)
    again = await env.step(moved, TourStep(), Timings())
    assert len(context.engine.mgets) == 2  # the kNN hits brought their own vectors
    assert again.round == 2 and not np.allclose(again.vector, moved.vector)


async def test_the_oracle_takes_tours_step_when_only_it_finds_a_relevant_doc(context) -> None:
    env = Environment(context, k=5, top_k=20)
    start = await env.start("q", Timings())
    moved = await env.step(start, TourStep(), Timings())
    found = [doc for doc in moved.answer if doc not in start.phi]
    judgements = {found[0]: 1}
    without = await OraclePolicy(judgements, k=5).decide(env, start, Timings())
    assert without.chosen is None and not without.considered
    with_step = await OraclePolicy(judgements, k=5, tour_step=TourStep()).decide(
        env, start, Timings())
    assert isinstance(with_step.chosen, TourStep)
    assert [s.to_dict()["dq"] for s in with_step.considered] == ["tour-step"]
    assert with_step.considered[0].score > 0


def test_oracle_agent_checks_its_tour_action_option(context) -> None:
    options = {"qrels": {"1": {"d0": 1}}, "queries": {"1": "q"}}
    AGENTS["oracle-agent"](context, {**options, "tour_action": True})
    with pytest.raises(ConfigError, match="tour_action must be true or false"):
        AGENTS["oracle-agent"](context, {**options, "tour_action": "yes"})
