"""Agents as search methods: one session of a policy in the HRE per query, with a trace.

Factories have the pipeline's shape, `(context, options) -> SearchMethod`; options are
checked once, when the method is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from es_tour.agents._environment import Environment, State, TourStep
from es_tour.agents._model import DEFAULT_POLICY, TreePolicy, check_policy_name
from es_tour.agents._policies import (
    Decision,
    LearnedPolicy,
    NoRefinement,
    OraclePolicy,
    Policy,
    Rm3Policy,
    TourPolicy,
)
from es_tour.errors import ConfigError
from es_tour.options import check_bool, check_int, check_number
from es_tour.pipeline import (
    MethodFactory,
    MethodOptions,
    Provenance,
    RankedHit,
    RoundTrace,
    SearchContext,
    SearchMethod,
    SearchResult,
    Timings,
    label_mass,
    register_method,
)
from es_tour.tour import MAX_K, TourConfig, check_variant

MAX_AGENT_K = 1000  # docs an agent labels per round, at most


@dataclass(kw_only=True)
class AgentRound(RoundTrace):
    """An agent round: the query it ran (`ranking` is its answer A_t), the Δq candidates
    the policy weighed and the one it chose (None ends the session)."""

    query: dict[str, Any]  # the Lucene text and the engine's bool query
    answer_change: dict[str, list[str]]  # ids that entered and left A_t
    candidates: list[dict[str, Any]]
    chosen: str | None
    engine_calls: int


@dataclass(frozen=True)
class HreOptions(MethodOptions):
    k: int = 10  # |A_t|, and the depth of each BM25 call
    top_k: int = 1000  # K: the kNN sub-collection fixed by the session's one dense call
    budget: int | None = None  # labeler pairs per query at most; the session ends when spent

    def __post_init__(self) -> None:
        check_int("k", self.k, 1, MAX_AGENT_K)
        check_int("top_k", self.top_k, self.k, MAX_K)
        if self.budget is not None:
            check_int("budget", self.budget, 1, MAX_AGENT_K * 51)


@dataclass(frozen=True)
class AgentOptions(HreOptions):
    max_rounds: int = 5  # refinements at most; round 0 is the HRE itself
    m: int = 5  # candidate terms per operator

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("max_rounds", self.max_rounds, 0, 50)
        check_int("m", self.m, 1, 100)


@dataclass(frozen=True)
class TourAgentOptions(HreOptions):
    # one step after round 0, by the soft loss: on SciFact train a second step added
    # 0.0002 nDCG@10 for 10 more pairs, the hard loss 0.0004 less (docs/agents.md)
    max_rounds: int = 1
    variant: str = "soft"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("max_rounds", self.max_rounds, 0, 50)
        check_variant(self.variant)


@dataclass(frozen=True)
class OracleOptions(AgentOptions):
    """qrels: query id -> {doc id: relevance}; queries: query id -> text (to find a query's).
    tour_action: also try TOUR's step (`TourStep`, TourConfig's defaults) each round.
    pseudo_relevant: try the learned agent's candidates, from A_t's best that many docs by
    φ, instead of the judged pools."""

    qrels: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    queries: Mapping[str, str] = field(default_factory=dict)
    tour_action: bool = False
    pseudo_relevant: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("tour_action", self.tour_action)
        if self.pseudo_relevant is not None:
            check_int("pseudo_relevant", self.pseudo_relevant, 1, MAX_AGENT_K)
        if not (_mapping_of(self.qrels, lambda judged: _mapping_of(judged, _is_int))
                and _mapping_of(self.queries, lambda text: isinstance(text, str))):
            raise ConfigError("oracle-agent needs `qrels` {query id: {doc id: relevance}} and "
                              "`queries` {query id: text}")

    def judgements(self, query: str) -> Mapping[str, int]:
        for qid, text in self.queries.items():
            if text == query and qid in self.qrels:
                return self.qrels[qid]
        raise ConfigError(f"oracle-agent has no qrels for the query {query!r}")


@dataclass(frozen=True)
class LearnedOptions(AgentOptions):
    policy: str = DEFAULT_POLICY  # a trained policy's registry name, never a path
    threshold: float | None = None  # overrides the stored stop threshold
    pseudo_relevant: int = 3  # best docs of A_t by φ that stand in for the relevant ones

    def __post_init__(self) -> None:
        super().__post_init__()
        # past k, every doc of A_t stands in
        check_int("pseudo_relevant", self.pseudo_relevant, 1, MAX_AGENT_K)
        check_policy_name(self.policy)
        if self.threshold is not None:
            check_number("threshold", self.threshold, 0, 1)


@dataclass
class Session:
    """Every state of one session, the decision taken in each, and what it cost."""

    states: list[State]
    decisions: list[Decision]
    rounds: list[RoundTrace]
    env: Environment
    provenance: Provenance = field(default_factory=Provenance)


async def run_session(env: Environment, policy: Policy, query: str, max_rounds: int,
                      timings: Timings) -> Session:
    """Round 0, then decide and step until the policy stops or after max_rounds refinements.

    Each round's trace covers its retrieval and labelling and the decision taken on its
    state (for the oracle, every trial); `timings` gathers engine and model time.
    """
    states: list[State] = []
    decisions: list[Decision] = []
    rounds: list[RoundTrace] = []
    provenance = Provenance()
    previous: tuple[str, ...] = ()
    while True:
        started, round_timings = time.perf_counter(), Timings()
        calls, pairs = env.budget.engine_calls, env.budget.pairs_scored
        if not states:
            state = await env.start(query, round_timings)
        else:
            chosen = decisions[-1].chosen
            assert chosen is not None
            state = await env.step(states[-1], chosen, round_timings)
        decision = Decision()
        if state.round < max_rounds and not env.budget.spent:
            decision = await policy.decide(env, state, round_timings)
        states.append(state)
        decisions.append(decision)
        new_docs = sum(provenance.add(state.round, ids, retriever)
                       for retriever, ids in state.returned.items())
        round_timings.total_ms = (time.perf_counter() - started) * 1000
        timings.engine_ms += round_timings.engine_ms
        timings.model_ms += round_timings.model_ms
        rounds.append(AgentRound(
            round=state.round, retrieved=state.retrieved,
            newly_scored=env.budget.pairs_scored - pairs, timings=round_timings,
            ranking=list(state.answer), new_docs=new_docs,
            label_mass_at_10=label_mass(state.answer, state.phi),
            query=env.describe(state.query),
            answer_change={"entered": [d for d in state.answer if d not in previous],
                           "left": [d for d in previous if d not in state.answer]},
            candidates=[scored.to_dict() for scored in decision.considered],
            chosen=decision.chosen.render() if decision.chosen else None,
            engine_calls=env.budget.engine_calls - calls))
        if decision.chosen is None:
            return Session(states, decisions, rounds, env, provenance)
        previous = state.answer


class AgentMethod:
    """A policy acting in the HRE, behind the pipeline's `search(query, size)`.

    `policy` makes the policy of one query (the oracle's depends on the query's qrels).
    """

    def __init__(self, name: str, context: SearchContext, options: HreOptions,
                 policy: Callable[[str], Policy]):
        self.name = name
        self.context = context
        self.options = options
        self._policy = policy

    async def search(self, query: str, size: int = 10) -> SearchResult:
        started, timings = time.perf_counter(), Timings()
        policy = self._policy(query)
        top_k = self.options.top_k
        if not policy.searches_top_k:  # Top-K is then only the answer's tail: as deep as shown
            top_k = min(top_k, max(size, self.options.k))
        env = Environment(self.context, self.options.k, top_k, self.options.budget)
        max_rounds = getattr(self.options, "max_rounds", 0)  # hre's options have none
        session = await run_session(env, policy, query, max_rounds, timings)
        final = session.states[-1]
        labelled = sorted(final.phi.items(), key=lambda item: -item[1])
        rest = env.unlabelled_rest(final)
        session.provenance.add(0, [doc for doc, _ in rest], "knn")  # Top-K, from round 0
        # labelled docs by φ first, then the rest of Top-K, as a rerank window would be
        hits = [session.provenance.stamp(RankedHit(doc, score, env.sources.get(doc, {})),
                                         final.phi)
                for doc, score in [*labelled, *rest][:size]]
        timings.total_ms = (time.perf_counter() - started) * 1000
        parameters = {f.name: getattr(self.options, f.name) for f in fields(self.options)
                      if f.name not in ("qrels", "queries")}
        return SearchResult(self.name, hits, session.rounds, env.budget.pairs_scored,
                            env.budget.engine_calls, timings, parameters)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping_of(value: Any, valid: Callable[[Any], bool]) -> bool:
    """A non-empty mapping of string keys whose every value is `valid`."""
    return (isinstance(value, Mapping) and bool(value)
            and all(isinstance(key, str) and valid(item) for key, item in value.items()))


def hre(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """The environment alone: round 0, no refinement. Options: k, top_k, budget."""
    return AgentMethod("hre", context, HreOptions.from_mapping(options), lambda _: NoRefinement())


def rm3_agent(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """+term with the top RM3 term of A_t each round. Options: k, top_k, budget, max_rounds,
    m."""
    checked = AgentOptions.from_mapping(options)
    return AgentMethod("rm3-agent", context, checked, lambda _: Rm3Policy(checked.m))


def tour_agent(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """TOUR's step each round in the HRE. Options: k, top_k, budget, max_rounds (1),
    variant (soft)."""
    checked = TourAgentOptions.from_mapping(options)
    step = TourStep(TourConfig(variant=checked.variant))
    return AgentMethod("tour-agent", context, checked, lambda _: TourPolicy(step))


def oracle_agent(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """The nDCG oracle. Options: k, top_k, budget, max_rounds, m, tour_action, qrels, queries
    (both required)."""
    checked = OracleOptions.from_mapping(options)
    step = TourStep() if checked.tour_action else None
    return AgentMethod("oracle-agent", context, checked,
                       lambda query: OraclePolicy(checked.judgements(query), checked.m, checked.k,
                                                  step, checked.pseudo_relevant))


def learned_agent(context: SearchContext, options: Mapping[str, Any]) -> SearchMethod:
    """The behaviour-cloned policy. Options: k, top_k, budget, max_rounds, m, policy,
    threshold, pseudo_relevant."""
    checked = LearnedOptions.from_mapping(options)
    model = TreePolicy.named(checked.policy)
    if checked.threshold is not None:
        model = model.with_threshold(checked.threshold)
    step = TourStep() if model.takes_tour_step else None
    return AgentMethod("learned-agent", context, checked,
                       lambda _: LearnedPolicy(model, checked.m, checked.pseudo_relevant, step))


AGENTS: dict[str, MethodFactory] = {
    "hre": hre,
    "rm3-agent": rm3_agent,
    "tour-agent": tour_agent,
    "oracle-agent": oracle_agent,
    "learned-agent": learned_agent,
}
for _name, _factory in AGENTS.items():
    register_method(_name, _factory, budget_option="budget")
