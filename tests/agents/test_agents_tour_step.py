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
        self.docs_read: list[tuple[str, ...]] = []

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.knn_vectors.append(np.asarray(vector))
        order = [i for i in np.argsort(-(DOCS @ vector), kind="stable")
                 if ids is None or f"d{i}" in ids][:k]
        return [Hit(f"d{i}", float(DOCS[i] @ vector),
                    {} if returns in ("ids", "keys") else {"title": f"d{i}"},
                    DOCS[i] if returns == "vectors" else None) for i in order]

    async def bm25(self, index, text, k, *, fields, ids=None, exclude=(), ids_only=False,
                  keyed=False):
        return [_stored(f"d{i}", exclude) for i in range(90, 90 + min(k, 10))]

    async def bool_search(self, index, query, k, *, ids=None, exclude=(), ids_only=False,
                  keyed=False):
        return [_stored(f"d{i}", exclude) for i in range(90, 90 + min(k, 10))]

    def known_id(self, doc):  # the fake names every doc by its _id
        return doc

    def known_name(self, doc):
        return {"_id": doc}

    async def doc_ids(self, index, docs):
        return list(docs)

    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        self.docs_read.append(tuple(ids))
        return [_stored(doc, exclude) for doc in ids]

    async def term_stats(self, index, ids, *, fields):
        return TermStats({doc: {} for doc in ids}, {}, 100)  # no terms: no Δq candidates

    async def analyzed_tokens(self, index, text, *, field="text"):
        return text.lower().split()


def _stored(doc: str, exclude) -> Hit:
    source = {"title": doc}
    if "embedding" not in exclude:
        source["embedding"] = DOCS[int(doc[1:])].tolist()
    return Hit(doc, 1.0, source)


@pytest.fixture
def context(fake_context) -> SearchContext:
    return fake_context(FakeEngine(), QUERY, PHI)


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
    # round 0 read the docs it labelled with their vectors (BM25's came with sources, so
    # only Top-K's first k): the step reads none of them again, only the new docs its kNN
    # found, with vectors
    knn_first = tuple(doc for doc in start.phi if doc not in start.returned["bm25"])
    assert context.engine.docs_read == [knn_first, tuple(new)]
    reads = len(context.engine.docs_read)
    again = await env.step(moved, TourStep(), Timings())
    newer = [doc for doc in again.phi if doc not in moved.phi]
    assert context.engine.docs_read[reads:] == [tuple(newer)]  # none read twice
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


def test_tours_step_has_its_own_kind_and_only_the_states_features() -> None:
    from es_tour.agents import FEATURES, Refinement
    from es_tour.agents._features import ACTION_KINDS, candidate_features

    stats = TermStats({"d1": {"alpha": 2}, "d2": {"beta": 1}}, {"alpha": 3, "beta": 5}, 100)
    rows = candidate_features([Refinement("alpha", "must"), TourStep()], stats, ["d1", "d2"],
                              [0.9, 0.4], ["q"], 0.2)
    kind, idf = FEATURES.index("kind"), FEATURES.index("idf")
    assert rows[1, kind] == ACTION_KINDS.index("tour") != rows[0, kind]
    assert rows[1, idf] == 0 < rows[0, idf]
    for state_feature in ("round", "phi_spread", "phi_range"):
        column = FEATURES.index(state_feature)
        assert rows[1, column] == rows[0, column] > 0


class AlwaysSure:
    threshold = 0.5

    def predict(self, features):
        # sure of TOUR's step only, so the policy takes it whenever it is offered
        from es_tour.agents._features import ACTION_KINDS

        return (features[:, 0] == ACTION_KINDS.index("tour")).astype(float)


async def test_the_learned_policy_offers_tours_step_only_when_trained_with_it(context) -> None:
    from es_tour.agents import LearnedPolicy

    env = Environment(context, k=5, top_k=20)
    start = await env.start("q", Timings())
    assert (await LearnedPolicy(AlwaysSure()).decide(env, start, Timings())).chosen is None
    taken = await LearnedPolicy(AlwaysSure(), tour_step=TourStep()).decide(env, start,
                                                                          Timings())
    assert isinstance(taken.chosen, TourStep)


def test_a_policy_trained_with_tours_step_says_so() -> None:
    from es_tour.agents import TreePolicy

    assert TreePolicy(None, info={"training": {"tour_action": True}}).takes_tour_step
    assert not TreePolicy(None, info={"training": {}}).takes_tour_step


async def test_tour_agent_takes_one_step_after_round_zero_by_default(context) -> None:
    result = await AGENTS["tour-agent"](context, {"k": 5, "top_k": 20}).search("q", 10)
    first, second = result.rounds
    assert first.chosen == "tour-step" and second.chosen is None
    assert second.newly_scored > 0  # the moved vector brought docs round 0 had not seen
    assert result.parameters["variant"] == "soft"
    hre = await AGENTS["hre"](context, {"k": 5, "top_k": 20}).search("q", 10)
    assert result.pairs_scored > hre.pairs_scored


def test_tour_agent_checks_its_options(context) -> None:
    with pytest.raises(ConfigError, match="variant"):
        AGENTS["tour-agent"](context, {"variant": "medium"})
    with pytest.raises(ConfigError, match="max_rounds"):
        AGENTS["tour-agent"](context, {"max_rounds": -1})
