"""Hybrid search agents (HARE / Learning-to-Search) over BM25 and one kNN call.

The query grammar (parse, compile to `bool`, render as Lucene text), the hybrid retrieval
environment, and policies behind one interface: `hre`, `rm3-agent`, `tour-agent`,
`oracle-agent`, `learned-agent`, each with a pipeline-shaped factory in `AGENTS`; TOUR's
step as an action (`TourStep`); and `hybrid-tour`, TOUR's vector step and the RM3 agent's
Δq in one session.
"""

from __future__ import annotations

from es_tour.agents._environment import Action, Budget, Environment, State, TourStep
from es_tour.agents._features import FEATURES, rm3_weights
from es_tour.agents._grammar import (
    KINDS,
    WEIGHTS,
    GrammarError,
    Query,
    Refinement,
    compile_bool,
    from_bool,
    parse,
    render,
)
from es_tour.agents._hybrid_tour import HybridTourMethod, HybridTourOptions, hybrid_tour
from es_tour.agents._labeling import CorpusLabeler, corpus_labeler
from es_tour.agents._methods import (
    AGENTS,
    AgentMethod,
    AgentOptions,
    AgentRound,
    HreOptions,
    LearnedOptions,
    OracleOptions,
    Session,
    TourAgentOptions,
    hre,
    learned_agent,
    oracle_agent,
    rm3_agent,
    run_session,
    tour_agent,
)
from es_tour.agents._model import (
    TreePolicy,
    check_policy_name,
    fit_trees,
    policy_dir,
    tree_classifier,
)
from es_tour.agents._policies import (
    Decision,
    LearnedPolicy,
    NoRefinement,
    OraclePolicy,
    Policy,
    Rm3Policy,
    Scored,
    TourPolicy,
)

__all__ = [
    "AGENTS",
    "FEATURES",
    "KINDS",
    "WEIGHTS",
    "Action",
    "AgentMethod",
    "AgentOptions",
    "AgentRound",
    "Budget",
    "CorpusLabeler",
    "Decision",
    "Environment",
    "GrammarError",
    "HreOptions",
    "HybridTourMethod",
    "HybridTourOptions",
    "LearnedOptions",
    "LearnedPolicy",
    "NoRefinement",
    "OracleOptions",
    "OraclePolicy",
    "Policy",
    "Query",
    "Refinement",
    "Rm3Policy",
    "Scored",
    "Session",
    "State",
    "TourAgentOptions",
    "TourPolicy",
    "TourStep",
    "TreePolicy",
    "check_policy_name",
    "compile_bool",
    "corpus_labeler",
    "fit_trees",
    "from_bool",
    "hre",
    "hybrid_tour",
    "learned_agent",
    "oracle_agent",
    "parse",
    "policy_dir",
    "render",
    "rm3_agent",
    "rm3_weights",
    "run_session",
    "tour_agent",
    "tree_classifier",
]
