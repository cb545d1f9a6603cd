"""Policy logic against a tiny fake environment: pure, no engine."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pytest

from es_tour.agents import (
    FEATURES,
    LearnedPolicy,
    OraclePolicy,
    Query,
    Refinement,
    Rm3Policy,
    State,
    TreePolicy,
    fit_trees,
    policy_dir,
)
from es_tour.agents._features import query_terms
from es_tour.agents._policies import pseudo_relevance_candidates
from es_tour.engines import TermStats
from es_tour.errors import ModelError
from es_tour.pipeline import Timings
from es_tour.training._agents import act_threshold

# d1, d2 relevant; d1 seen, d2 not. "shared" is in d1 (seen) and d2 (unseen).
TF = {
    "d1": {"vitamin": 3, "shared": 2, "bone": 1},
    "d2": {"shared": 1, "calcium": 4},
    "d3": {"vitamin": 1, "noise": 5, "mice": 2},
    "d4": {"noise": 1, "rat": 1},
}
DF = {"vitamin": 40, "shared": 3, "bone": 20, "calcium": 9, "noise": 300, "mice": 12, "rat": 2}
STATS = TermStats(TF, DF, 1000)


@dataclass
class FakeEnv:
    """Answers `step` from a table: rendered Δq -> the docs it brings in (with φ)."""

    brings: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    k: int = 3

    async def term_stats(self, ids, timings):
        return TermStats({d: TF[d] for d in TF}, DF, 1000)

    async def q0_tokens(self, timings):
        return ["vitamin"]

    async def step(self, state, delta, timings):
        self.steps.append(delta.render())
        phi = {**state.phi, **self.brings.get(delta.render(), {})}
        answer = tuple(sorted(phi, key=lambda d: -phi[d])[: self.k])
        return State(state.round + 1, state.query.refine(delta), phi, answer)


def _state(phi: dict[str, float], k: int = 3) -> State:
    return State(0, Query("vitamin d"), phi, tuple(sorted(phi, key=lambda d: -phi[d])[:k]))


async def test_rm3_adds_the_top_expansion_term_not_in_the_query_as_must() -> None:
    state = _state({"d1": 0.9, "d3": 0.5, "d4": 0.1})
    decision = await Rm3Policy(m=3).decide(FakeEnv(), state, Timings())
    assert decision.chosen is not None
    assert decision.chosen.operator == "must"
    assert decision.chosen.term != "vitamin"  # q0's analysed token is never proposed
    scores = [s.score for s in decision.considered]
    assert scores == sorted(scores, reverse=True)
    assert decision.chosen == decision.considered[0].delta


async def test_oracle_keeps_the_candidate_that_most_improves_ndcg() -> None:
    state = _state({"d1": 0.9, "d3": 0.5, "d4": 0.1})
    env = FakeEnv(brings={"shared^8": {"d2": 0.8}, "+shared": {"d4": 0.05}})
    decision = await OraclePolicy({"d1": 1, "d2": 1}, m=2, k=3).decide(env, state, Timings())
    assert decision.chosen == Refinement("shared", "should", 8.0)
    # positive pools hold only terms an unseen relevant doc shares with A_t
    positive = {s.delta.term for s in decision.considered if s.delta.operator != "must_not"}
    assert positive == {"shared"}
    negative = {s.delta.term for s in decision.considered if s.delta.operator == "must_not"}
    assert negative <= {"mice", "rat"}  # "noise" held by d3/d4 only, but ranked below


async def test_oracle_stops_without_trials_when_every_relevant_doc_was_seen() -> None:
    env = FakeEnv()
    state = _state({"d1": 0.9, "d3": 0.5, "d4": 0.1})
    decision = await OraclePolicy({"d1": 1, "d3": 1}, m=2).decide(env, state, Timings())
    assert decision.chosen is None and not env.steps


async def test_oracle_stops_when_no_candidate_improves() -> None:
    state = _state({"d1": 0.9, "d3": 0.5, "d4": 0.1})
    decision = await OraclePolicy({"d1": 1, "d2": 1}, m=2).decide(FakeEnv(), state, Timings())
    assert decision.chosen is None
    assert decision.considered and all(s.score == 0 for s in decision.considered)


async def test_an_oracle_over_the_learned_agents_pool_tries_only_that_agents_candidates(
) -> None:
    state = _state({"d1": 0.9, "d3": 0.5, "d4": 0.1})
    # "bone" is d1's alone: no unseen relevant doc holds it, so the judged pools never try it
    env = FakeEnv(brings={"bone^8": {"d2": 0.8}})
    oracle = OraclePolicy({"d1": 1, "d2": 1}, m=2, k=3, pseudo_relevant=1)
    decision = await oracle.decide(env, state, Timings())
    assert decision.chosen == Refinement("bone", "should", 8.0)
    used = query_terms(state.query, await env.q0_tokens(Timings()))
    assert [s.delta for s in decision.considered] == pseudo_relevance_candidates(
        state, STATS, used, 2, 1)
    judged = await OraclePolicy({"d1": 1, "d2": 1}, m=2, k=3).decide(env, state, Timings())
    assert judged.chosen != decision.chosen


@dataclass
class FixedModel:
    threshold: float
    favourite: int = 0

    def predict(self, features):
        scores = np.full(len(features), 0.1)
        scores[self.favourite] = 0.7
        return scores


async def test_learned_policy_takes_the_best_candidate_above_its_threshold() -> None:
    state = _state({"d1": 0.9, "d2": 0.6, "d3": 0.5, "d4": 0.1}, k=4)
    decision = await LearnedPolicy(FixedModel(0.5, 1), m=2, pseudo_relevant=2).decide(
        FakeEnv(), state, Timings())
    assert decision.chosen == decision.considered[1].delta


async def test_learned_policy_stops_when_no_candidate_reaches_the_threshold() -> None:
    state = _state({"d1": 0.9, "d2": 0.6, "d3": 0.5, "d4": 0.1}, k=4)
    decision = await LearnedPolicy(FixedModel(0.9), m=2).decide(FakeEnv(), state, Timings())
    assert decision.chosen is None and decision.considered


def test_tree_policy_learns_a_rule_no_line_separates_and_round_trips(tmp_path) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, len(FEATURES)))
    y = ((X[:, 3] > 0.2) & (X[:, 5] < 0)).astype(float)  # an AND: trees, not one line
    model = TreePolicy(fit_trees(X, y), threshold=0.5)
    assert ((model.predict(X) >= 0.5) == (y > 0)).mean() > 0.95
    model.save(tmp_path, {"training": {"queries": 0}})
    loaded = TreePolicy.load(tmp_path)
    np.testing.assert_allclose(loaded.predict(X), model.predict(X))
    assert loaded.info["training"] == {"queries": 0} and loaded.threshold == 0.5
    assert loaded.with_threshold(0.7).threshold == 0.7


def test_a_tampered_policy_file_is_refused_before_it_is_unpickled(tmp_path) -> None:
    X = np.vstack([np.eye(len(FEATURES))] * 20)
    model = TreePolicy(fit_trees(X, np.arange(len(X)) % 2))
    model.save(tmp_path, {})
    (tmp_path / "policy-v2.pkl").write_bytes(b"not the file")
    with pytest.raises(ModelError, match="sha256"):
        TreePolicy.load(tmp_path)


def test_a_policy_of_the_old_format_asks_to_be_retrained(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text('{"format": 1}')
    with pytest.raises(ModelError, match="retrain"):
        TreePolicy.load(tmp_path)


def test_a_missing_policy_names_how_to_train_one(tmp_path) -> None:
    with pytest.raises(ModelError, match="train-agent"):
        TreePolicy.load(tmp_path / "absent")


def test_the_act_threshold_is_the_deepest_cut_that_keeps_half_the_steps_good() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = np.array([1, 0, 1, 0, 0])
    assert act_threshold(scores, labels, 0.5) == 0.6  # 2 of the top 4 improved
    assert act_threshold(scores, np.zeros(5), 0.5) == 1.0  # nothing improved: never act


def test_a_policy_with_nothing_learned_never_acts_and_round_trips(tmp_path) -> None:
    never = TreePolicy(None, threshold=1.0)
    never.save(tmp_path, {})
    loaded = TreePolicy.load(tmp_path)
    assert loaded.model is None and loaded.predict(np.ones((4, len(FEATURES)))).tolist() == [0] * 4


def test_a_named_policy_is_read_once_and_afresh_when_retrained(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path))
    X = np.vstack([np.eye(len(FEATURES))] * 20)
    TreePolicy(fit_trees(X, np.arange(len(X)) % 2), threshold=0.3).save(
        policy_dir("cached"), {})
    first = TreePolicy.named("cached")
    assert TreePolicy.named("cached") is first  # no second read of the pickle
    manifest = policy_dir("cached") / "manifest.json"
    TreePolicy(None, threshold=0.9).save(policy_dir("cached"), {"retrained": True})
    os.utime(manifest, ns=(manifest.stat().st_atime_ns, manifest.stat().st_mtime_ns + 10**9))
    retrained = TreePolicy.named("cached")
    assert retrained is not first and retrained.threshold == 0.9
