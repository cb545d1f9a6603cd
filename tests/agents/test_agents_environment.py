"""The HRE and the agent methods over a fake engine that records its calls."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from es_tour import agents
from es_tour.agents import AGENTS, Environment, Refinement, parse
from es_tour.engines import Hit, TermStats, doc_key, key_seq_no
from es_tour.errors import ConfigError
from es_tour.pipeline import ModelPool, SearchContext, Timings

PHI = {f"d{i}": 1.0 - i / 100 for i in range(100)}  # d0 is best


class FakeEngine:
    """BM25 returns docs by a fixed order per query text; kNN returns d50.. first, by doc
    key (doc i's sequence number is i) where asked for keys; a search restricted to doc
    keys names its hits by them; a fetch by doc key learns each doc's `_id`."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self._ids: dict[str, str] = {}

    async def bm25(self, index, text, k, *, fields, ids=None, exclude=(), ids_only=False,
                  keyed=False):
        self.calls.append(("bm25", text, ids, keyed))
        if keyed:  # doc keys and scores, no source
            return [Hit(doc_key(i), 1.0) for i in range(20, 20 + k)]
        return [_hit(f"d{i}") for i in range(20, 20 + k)]

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.calls.append(("knn", k, returns))
        name = doc_key if returns == "keys" else "d{}".format
        return [Hit(name(i), 1.0) for i in range(50, 50 + k)]

    def known_id(self, doc):
        return self._ids.get(doc, doc)

    def known_name(self, doc):
        return {"_id": self._ids[doc]} if doc in self._ids else None

    def _as_asked(self, doc: str) -> Hit:
        """Doc `doc`'s hit, named by its `_id` or its doc key, as `doc` names it."""
        seq_no = key_seq_no(doc)
        if seq_no is not None:
            self._ids[doc] = f"d{seq_no}"
        return replace(_hit(self.known_id(doc)), id=doc)

    async def doc_ids(self, index, docs):
        return list(docs)

    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        self.calls.append(("docs_by_id", tuple(ids), tuple(exclude)))
        return [self._as_asked(doc) for doc in ids]

    async def bool_search(self, index, query, k, *, ids=None, exclude=(), ids_only=False,
                  keyed=False):
        self.calls.append(("bool", query, None if ids is None else len(ids)))
        if ids is None:
            return [_hit(f"d{i}") for i in range(5, 5 + k)]
        name = doc_key if any(key_seq_no(doc) is not None for doc in ids) else "d{}".format
        return [self._as_asked(name(i)) for i in range(60, 60 + k)]

    async def term_stats(self, index, ids, *, fields):
        self.calls.append(("term_stats", tuple(ids)))
        return TermStats({d: {"t" + d: 1, "common": 2} for d in ids},
                         {"common": 50, **{"t" + d: 2 for d in ids}}, 100)

    async def analyzed_tokens(self, index, text, *, field="text"):
        self.calls.append(("analyzed_tokens", text))
        return text.lower().split()


def _hit(doc: str) -> Hit:
    return Hit(doc, 1.0, {"title": doc, "text": "", "embedding": [0.0]})


@pytest.fixture
def context(fake_context) -> SearchContext:
    return fake_context(FakeEngine(), np.ones(4), PHI)


async def test_round_zero_makes_one_dense_call_and_labels_the_union(context) -> None:
    env = Environment(context, k=3, top_k=10)
    state = await env.start("Vitamin D", Timings())
    kinds = [call[0] for call in context.engine.calls]
    assert kinds.count("knn") == 1
    # both legs come back by doc key, no stored field read, the BM25 leg counting the
    # total; only the docs labelled are read, in one fetch, in turn from each leg, as whole
    # sources (no filter), and named by `_id` from then on
    assert context.engine.calls[kinds.index("knn")][1:] == (10, "keys")
    assert context.engine.calls[kinds.index("bm25")][3] is True
    assert context.engine.calls[kinds.index("docs_by_id")][1:] == (
        tuple(doc_key(i) for i in (50, 20, 51, 21, 52, 22)), ())
    assert kinds.count("docs_by_id") == 1
    # BM25 top-3 (d20..d22) and the first 3 of Top-K (d50..d52), each labelled once
    assert set(state.phi) == {"d20", "d21", "d22", "d50", "d51", "d52"}
    assert state.answer == ("d20", "d21", "d22")
    assert env.budget.pairs_scored == 6 and env.budget.engine_calls == 3
    assert "embedding" not in env.sources["d50"] and env.sources["d50"]["title"] == "d50"


async def test_a_step_searches_the_index_and_top_k_and_never_calls_knn_again(context) -> None:
    env = Environment(context, k=3, top_k=10)
    state = await env.start("q", Timings())
    after = await env.step(state, Refinement("calcium", "must"), Timings())
    bools = [call for call in context.engine.calls if call[0] == "bool"]
    assert [call[2] for call in bools] == [None, 10]  # whole index, then the ids filter
    assert bools[0][1]["bool"]["must"][0]["multi_match"]["query"] == "calcium"
    assert [call[0] for call in context.engine.calls].count("knn") == 1
    assert after.answer == ("d5", "d6", "d7")  # best φ of everything seen
    assert set(state.phi) < set(after.phi) and state.round + 1 == after.round
    # the hits within Top-K (filtered by doc key) are labelled under their `_id`s
    assert {"d60", "d61", "d62"} <= set(after.phi)
    assert all(key_seq_no(doc) is None for doc in after.phi)
    assert [doc for doc, _ in env.unlabelled_rest(after)] == [
        doc_key(i) for i in range(53, 60)]  # Top-K's rest, no `_id` read for it
    again = await env.step(state, Refinement("calcium", "must"), Timings())
    assert again.phi == after.phi and len(bools) == 2  # same query: no new engine calls
    assert env.budget.pairs_scored == len(after.phi)


async def test_term_vectors_are_fetched_once_per_doc(context) -> None:
    env = Environment(context, k=3, top_k=10)
    await env.term_stats(["d1", "d2"], Timings())
    stats = await env.term_stats(["d2", "d3"], Timings())
    assert [c[1] for c in context.engine.calls if c[0] == "term_stats"] == [("d1", "d2"), ("d3",)]
    assert set(stats.tf) == {"d1", "d2", "d3"}


async def test_rm3_agent_trace_holds_queries_candidates_choices_and_costs(context) -> None:
    method = AGENTS["rm3-agent"](context, {"k": 3, "top_k": 10, "max_rounds": 2, "m": 2})
    result = await method.search("Vitamin D", size=5)
    assert [r.round for r in result.rounds] == [0, 1, 2]
    first, last = result.rounds[0], result.rounds[-1]
    assert first.query["lucene"] == "(Vitamin D)"
    assert first.chosen.startswith("+") and len(first.candidates) == 2
    chosen = result.rounds[1].chosen
    assert parse(last.query["lucene"]).refinements[-1].render() == chosen
    assert last.chosen is None  # max_rounds reached
    assert result.rounds[1].answer_change["entered"] == ["d5", "d6", "d7"]
    assert result.engine_calls == sum(r.engine_calls for r in result.rounds)
    assert result.pairs_scored == sum(r.newly_scored for r in result.rounds)
    assert [h.id for h in result.hits] == ["d5", "d6", "d7", "d20", "d21"]
    assert result.parameters == {"k": 3, "top_k": 10, "budget": None, "max_rounds": 2, "m": 2}


async def test_a_budget_below_round_zero_labels_knn_and_bm25_in_turn(context) -> None:
    env = Environment(context, k=3, top_k=10, budget=4)
    state = await env.start("q", Timings())
    assert list(state.phi) == ["d50", "d20", "d51", "d21"]
    assert env.budget.spent


async def test_an_agent_session_ends_when_its_budget_is_spent(context) -> None:
    options = {"k": 3, "top_k": 10, "max_rounds": 5, "m": 2}
    free = await AGENTS["rm3-agent"](context, options).search("q")
    capped = await AGENTS["rm3-agent"](context, {**options, "budget": 8}).search("q")
    assert free.pairs_scored > 8
    assert [r.newly_scored for r in capped.rounds] == [6, 2]
    assert capped.pairs_scored == 8 and capped.rounds[-1].chosen is None


def test_every_agent_declares_its_budget_option() -> None:
    from es_tour.pipeline import BUDGET_OPTIONS

    assert {name: BUDGET_OPTIONS[name] for name in AGENTS} == dict.fromkeys(AGENTS, "budget")


async def test_hre_never_refines(context) -> None:
    result = await AGENTS["hre"](context, {"k": 3, "top_k": 10}).search("q", size=3)
    assert len(result.rounds) == 1 and result.engine_calls == 3  # BM25, kNN, docs_by_id


def test_unknown_options_are_rejected_with_the_supported_ones(context) -> None:
    with pytest.raises(ConfigError, match="supported"):
        AGENTS["hre"](context, {"max_rounds": 3})


@pytest.mark.parametrize("options", [{"k": 0}, {"m": 0}, {"top_k": 5}, {"max_rounds": -1}])
def test_range_errors_echo_the_bad_value(context, options) -> None:
    with pytest.raises(ConfigError, match=str(next(iter(options.values())))):
        AGENTS["rm3-agent"](context, options)


def test_the_oracle_needs_qrels_and_queries(context) -> None:
    with pytest.raises(ConfigError, match="qrels"):
        AGENTS["oracle-agent"](context, {})


async def test_the_oracle_refuses_a_query_it_has_no_qrels_for(context) -> None:
    method = AGENTS["oracle-agent"](context, {"qrels": {"1": {"d9": 1}}, "queries": {"1": "a"}})
    with pytest.raises(ConfigError, match="no qrels"):
        await method.search("b")


def test_importing_the_agents_registers_them_as_methods() -> None:
    from es_tour.pipeline import METHODS

    assert set(AGENTS) <= set(METHODS)
    assert all(METHODS[name] is factory for name, factory in AGENTS.items())


def test_agents_never_import_an_engine_client() -> None:
    for source in Path(agents.__file__).parent.glob("*.py"):
        text = source.read_text()
        for client in ("elasticsearch", "opensearchpy"):
            assert f"import {client}" not in text and f"from {client}" not in text, source


async def test_agent_hits_say_which_round_and_retriever_found_them_and_their_phi(context) -> None:
    method = AGENTS["rm3-agent"](context, {"k": 3, "top_k": 10, "max_rounds": 1, "m": 2})
    result = await method.search("Vitamin D", size=10)
    by_id = {hit.id: hit for hit in result.hits}
    # round 1's refined query found d5..d7 (whole index); round 0 BM25 found d20..d22
    assert (by_id["d5"].round, by_id["d5"].retrieved_by) == (1, ("bm25",))
    assert (by_id["d20"].round, by_id["d20"].retrieved_by) == (0, ("bm25",))
    assert by_id["d5"].label == pytest.approx(PHI["d5"])
    # the labelled first k of Top-K came from kNN; the unlabelled rest too, with no φ
    knn_only = [hit for hit in result.hits if hit.retrieved_by == ("knn",)]
    assert knn_only and all(hit.round == 0 for hit in knn_only)
    assert {h.id for h in knn_only if h.label is None} == {h.id for h in knn_only} - {
        "d50", "d51", "d52"}
    # round 0 found the union of BM25 top-3 and kNN top-3; round 1 found d5..d7 and d60..d62
    assert [r.new_docs for r in result.rounds] == [6, 6]
    assert result.rounds[0].label_mass_at_10 == pytest.approx(
        sum(PHI[d] for d in ("d20", "d21", "d22")), abs=1e-5)


async def test_trials_run_at_once_never_spend_past_the_budget(context) -> None:
    pool = ModelPool(2)  # labels on threads, as the sidecar's do: the trials interleave
    env = Environment(replace(context, pool=pool), k=3, top_k=10, budget=9)
    state = await env.start("Vitamin D", Timings())  # 6 pairs: 3 left
    trials = await asyncio.gather(*(env.step(state, Refinement(term, "should"), Timings())
                                    for term in ("alpha", "beta", "gamma")))
    assert env.budget.pairs_scored == 9
    assert sum(len(trial.phi) - len(state.phi) for trial in trials) == 3
    pool.close()


async def test_an_agent_that_never_searches_top_k_asks_knn_only_as_deep_as_it_shows(
        fake_context) -> None:
    depths = {}
    for name in ("hre", "rm3-agent"):
        context = fake_context(FakeEngine(), np.ones(4), PHI)
        method = AGENTS[name](context, {"k": 3, "top_k": 50})
        await method.search("Vitamin D", size=7)
        depths[name] = [call[1] for call in context.engine.calls if call[0] == "knn"]
    # hre's Top-K is only its answer's tail; rm3-agent's Δq searches within all of it
    assert depths == {"hre": [7], "rm3-agent": [50]}
