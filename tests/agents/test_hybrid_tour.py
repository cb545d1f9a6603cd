"""hybrid-tour over a fake engine: exact kNN over random vectors, BM25 by a fixed order
(d119 scores highest) that a `+term` narrows to the docs holding the term."""

from __future__ import annotations

import numpy as np
import pytest

import es_tour.agents  # noqa: F401  (registers hybrid-tour)
from es_tour.engines import Hit, TermStats
from es_tour.errors import ConfigError, VectorUnreadableError
from es_tour.pipeline import BUDGET_OPTIONS, SearchContext, build_method, interleave
from es_tour.tour import hybrid_scores
from tests.conftest import DeletesAKnnHit

rng = np.random.default_rng(11)
DOCS = rng.normal(size=(120, 8)).astype(np.float32)
DOCS /= np.linalg.norm(DOCS, axis=1, keepdims=True)
PHI = {f"d{i}": float(v) for i, v in enumerate(DOCS @ DOCS[:3].mean(axis=0))}
QUERY = DOCS[60]
BM25_ORDER = [f"d{i}" for i in range(119, -1, -1)]  # d119 first
TERMS = {f"d{i}": {"even" if i % 2 == 0 else "odd": 3, f"w{i % 7}": 1} for i in range(120)}


def bm25(doc: str) -> float:
    return int(doc[1:]) / 10


class FakeEngine:
    name = "fake"

    def __init__(self) -> None:
        self.vectors: list[np.ndarray] = []
        self.queries: list[dict] = []
        self.restricted: list[list[str] | None] = []  # each BM25 call's ids filter
        self.fetched: list[list[str]] = []  # the docs of each call that returned vectors

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.vectors.append(np.asarray(vector))
        order = [i for i in np.argsort(-(DOCS @ vector), kind="stable")
                 if ids is None or f"d{i}" in ids][:k]
        if returns == "vectors":
            self.fetched.append([f"d{i}" for i in order])
        return [Hit(f"d{i}", float(DOCS[i] @ vector),
                    {} if returns in ("ids", "keys") else {"title": f"d{i}"},
                    DOCS[i] if returns == "vectors" else None) for i in order]

    async def bool_search(self, index, query, k, *, ids=None, exclude=(), ids_only=False,
                  keyed=False):
        self.queries.append(query)
        self.restricted.append(None if ids is None else list(ids))
        musts = [clause["multi_match"]["query"] for clause in query["bool"].get("must", [])]
        docs = [d for d in BM25_ORDER if all(term in TERMS[d] for term in musts)
                and (ids is None or d in ids)][:k]
        return [Hit(d, bm25(d), {} if ids_only or keyed else _source(d, exclude)) for d in docs]

    def known_id(self, doc):  # the fake names every doc by its _id
        return doc

    async def doc_ids(self, index, docs):
        return list(docs)

    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        # stored vectors asked for (a whole source holds them too, unread without `vectors`)
        if (include is None and vectors) or "embedding" in (include or ()):
            self.fetched.append(list(ids))
        kept = () if include is None else [f for f in ("title", "embedding") if f not in include]
        return [Hit(d, 0.0, _source(d, (*exclude, *kept))) for d in ids]

    async def term_stats(self, index, ids, *, fields):
        df: dict[str, int] = {}
        for doc in TERMS.values():
            for term in doc:
                df[term] = df.get(term, 0) + 1
        return TermStats({d: TERMS[d] for d in ids}, df, 1000)

    async def analyzed_tokens(self, index, text, *, field="text"):
        return text.lower().split()


def _source(doc: str, exclude) -> dict:
    source = {"title": doc, "embedding": DOCS[int(doc[1:])].tolist()}
    return {key: value for key, value in source.items() if key not in exclude}


@pytest.fixture
def context(fake_context) -> SearchContext:
    return fake_context(FakeEngine(), QUERY, PHI)


async def test_each_round_labels_new_docs_from_knn_and_bm25_in_turn_up_to_the_budget(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 6, "budget": 15, "max_rounds": 5}).search("q", 30)
    labelled = [r.labelled for r in result.rounds]
    assert [len(ids) for ids in labelled] == [6, 6, 3] and result.pairs_scored == 15
    assert len({d for ids in labelled for d in ids}) == 15
    knn0 = [f"d{i}" for i in np.argsort(-(DOCS @ QUERY), kind="stable")[:3]]
    assert labelled[0][0::2] == knn0 and labelled[0][1::2] == BM25_ORDER[:3]
    labels = [h.label for h in result.hits[:15]]
    assert labels == sorted(labels, reverse=True) and None not in labels


async def test_the_labels_move_the_vector_and_the_lucene_query(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 6, "budget": 18, "max_rounds": 2}).search("q", 10)
    first, second, last = result.rounds
    assert first.delta_q_norm and first.delta_q_norm > 0 and last.delta_q_norm is None
    sent = context.engine.vectors
    assert not np.allclose(sent[0], sent[1])  # round 1's kNN ran with the moved vector
    assert first.chosen is not None and first.chosen.startswith("+")
    assert second.query["lucene"].endswith(first.chosen)
    musts = context.engine.queries[1]["bool"].get("must", [])
    assert [m["multi_match"]["query"] for m in musts] == [first.chosen[1:]]


async def test_lexical_none_keeps_the_lucene_query(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 6, "budget": 18, "lexical": "none"}).search("q", 10)
    assert {r.query["lucene"] for r in result.rounds} == {"(q)"}
    assert all(r.chosen is None for r in result.rounds)


async def test_no_rounds_is_rerank_hybrid_of_the_budget(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 8, "budget": 8, "max_rounds": 0}).search("q", 8)
    pool = result.rounds[0].labelled
    assert [h.id for h in result.hits] == sorted(pool, key=lambda d: -PHI[d])
    assert len(result.rounds) == 1 and result.pairs_scored == 8


async def test_a_hybrid_linear_pool_labels_the_union_best_first_by_z_scored_bm25_and_knn(
        context):
    result = await build_method("hybrid-tour", context,
                                {"k": 6, "budget": 6, "max_rounds": 0, "pool": "hybrid-linear",
                                 "lexical_weight": 0.5}).search("q", 10)
    # the union of kNN's and BM25's top 100; the docs only kNN found get their BM25 from
    # one more call restricted to their ids, and those only BM25 found their kNN score
    unit = QUERY / np.linalg.norm(QUERY)
    knn = [f"d{i}" for i in np.argsort(-(DOCS @ unit), kind="stable")[:100]]
    ids = list(dict.fromkeys(knn + BM25_ORDER[:100]))
    assert len(ids) < 120 and any(d not in BM25_ORDER[:100] for d in knn)
    scores = hybrid_scores(np.array([bm25(d) for d in ids]),
                           np.array([DOCS[int(d[1:])] @ unit for d in ids]), 0.5)
    best = [ids[i] for i in np.argsort(-scores)[:6]]
    assert result.rounds[0].labelled == best
    assert best != [f"d{i}" for i in np.argsort(-(DOCS @ QUERY))[:6]]  # BM25 counted
    assert any(d not in knn for d in BM25_ORDER[:100])
    assert result.engine_calls == 4 and result.parameters["pool"] == "hybrid-linear"
    assert context.engine.fetched == []  # no step follows: no stored vector was read
    assert [h.id for h in result.hits[:6]] == sorted(best, key=lambda d: -PHI[d])


@pytest.mark.parametrize("options", [{"lexical": "oracle"}, {"k": 0}, {"stop": "top1"},
                                     {"lr": 0}, {"pool": "rrf"}, {"lexical_weight": 1.5}])
def test_bad_options_are_config_errors(context, options):
    with pytest.raises(ConfigError):
        build_method("hybrid-tour", context, options)


def test_hybrid_tour_declares_its_budget():
    assert BUDGET_OPTIONS["hybrid-tour"] == "budget"


async def test_below_the_labelled_docs_come_q0s_knn_and_bm25_in_turn(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 6, "budget": 12, "max_rounds": 1}).search("q", 30)
    labelled = {d for r in result.rounds for d in r.labelled}
    knn0 = [f"d{i}" for i in np.argsort(-(DOCS @ QUERY), kind="stable")[:30]]
    first = [h.id for h in interleave([Hit(d, 0.0) for d in knn0],
                                      [Hit(d, 0.0) for d in BM25_ORDER[:30]])]
    fill = [d for d in first if d not in labelled][: 30 - len(labelled)]
    assert [h.id for h in result.hits[len(labelled):]] == fill
    assert all(h.label is None for h in result.hits[len(labelled):])


async def test_every_round_of_a_long_session_takes_its_step(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 3, "budget": 30, "max_rounds": 5,
                                 "lexical": "none"}).search("q", 10)
    assert len(result.rounds) == 6
    assert all(r.delta_q_norm and r.delta_q_norm > 0 for r in result.rounds[:-1])


@pytest.mark.parametrize("pool", ["interleave", "hybrid-linear"])
async def test_the_rounds_engine_calls_add_up_to_the_searchs(context, pool):
    result = await build_method("hybrid-tour", context,
                                {"k": 4, "budget": 12, "pool": pool}).search("q", 10)
    assert sum(r.engine_calls for r in result.rounds) == result.engine_calls


@pytest.mark.parametrize("pool", ["interleave", "hybrid-linear"])
async def test_stored_vectors_are_read_for_the_labelled_docs_alone_each_once(context, pool):
    result = await build_method("hybrid-tour", context,
                                {"k": 4, "budget": 12, "max_rounds": 2, "lexical": "none",
                                 "pool": pool}).search("q", 10)
    stepped = [r.labelled for r in result.rounds[:-1]]  # the last round takes no step
    assert len(stepped) == 2
    assert context.engine.fetched == stepped


async def test_a_round_that_moves_only_the_vector_asks_no_bm25_again(context):
    result = await build_method("hybrid-tour", context,
                                {"k": 4, "budget": 12, "max_rounds": 2, "lexical": "none",
                                 "pool": "hybrid-linear"}).search("q", 10)
    assert len(result.rounds) == 3
    restricted = context.engine.restricted
    assert restricted.count(None) == 1  # the Lucene query's top 100, once for all rounds
    # each doc's BM25 asked once: a later round's union asks only for docs new to it
    asked = [doc for ids in restricted if ids is not None for doc in ids]
    assert asked and len(asked) == len(set(asked))
    # and the search hands fusion the BM25 of every doc it labelled
    labelled = {d for r in result.rounds for d in r.labelled}
    assert labelled <= set(result.lexical_scores)
    assert all(result.lexical_scores[d] == bm25(d) for d in labelled)


async def test_fusion_asks_the_engine_nothing_the_search_already_scored(context):
    plain = await build_method("hybrid-tour", context,
                               {"k": 4, "budget": 8, "lexical": "none",
                                "pool": "hybrid-linear"}).search("q", 10)
    before = len(context.engine.queries), len(context.engine.vectors)
    fused = await build_method("hybrid-tour", context,
                               {"k": 4, "budget": 8, "lexical": "none", "pool": "hybrid-linear",
                                "w_bm25": 0.5}).search("q", 10)
    # the same session's calls, none for fusion: its BM25 is known and w_dense is 0
    assert (len(context.engine.queries), len(context.engine.vectors)) == (
        before[0] * 2, before[1] * 2)
    labelled = [h.id for h in plain.hits if h.label is not None]
    assert {h.id for h in fused.hits[:len(labelled)]} == set(labelled)
    assert fused.engine_calls == plain.engine_calls


class DeletingEngine(DeletesAKnnHit, FakeEngine):
    """The fake engine, racing a delete."""


async def test_a_doc_deleted_before_its_text_is_read_is_neither_labelled_nor_shown(
        fake_context):
    engine = DeletingEngine()
    context = fake_context(engine, QUERY, PHI)
    result = await build_method("hybrid-tour", context, {"budget": 20}).search("q", 10)
    assert engine.deleted is not None and context.labeler.scored
    assert engine.deleted not in context.labeler.scored
    assert engine.deleted not in {hit.id for hit in result.hits} and len(result.hits) == 10


class LacksAVectorEngine(FakeEngine):
    """The fake engine with one doc indexed without a vector: the first one fetched."""

    lacking: str | None = None

    async def docs_by_id(self, index, ids, **kwargs):
        hits = await super().docs_by_id(index, ids, **kwargs)
        self.lacking = self.lacking or hits[0].id
        for hit in hits:
            if hit.id == self.lacking:
                hit.source.pop("embedding", None)
        return hits


async def test_a_doc_indexed_without_a_vector_beside_docs_with_theirs_is_a_400_naming_it(
        fake_context):
    """Round 0 read its other docs' vectors, so the caller can read the field: the doc
    without one was indexed so (a 400), not hidden by field-level security (the engine's
    own answer, degraded), even when its read comes alone."""
    engine = LacksAVectorEngine()
    context = fake_context(engine, QUERY, PHI)
    with pytest.raises(ConfigError, match="has no \\[embedding\\]") as met:
        await build_method("hybrid-tour", context, {"budget": 20}).search("q", 10)
    assert engine.lacking is not None and f"[{engine.lacking}]" in str(met.value)
    assert not isinstance(met.value, VectorUnreadableError)
