"""Ranking rules of the pipeline's methods, over an exact in-memory vector store.

The store stands in for the engine's kNN only to check how methods order what it returns;
the engines themselves are tested in integration_tests.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from es_tour.engines import Hit
from es_tour.errors import ConfigError, VectorUnreadableError
from es_tour.pipeline import SearchContext, Timings, build_method, knn_candidates
from es_tour.pipeline._first_stage import interleave
from es_tour.pipeline._fusion import FUSION_DEPTH, pool_scores
from es_tour.pipeline._tour_loop import RocchioOptions
from es_tour.tour import MAX_K, TourConfig, feedback_query, hybrid_scores
from tests.conftest import DeletesAKnnHit

rng = np.random.default_rng(7)
DOCS = rng.normal(size=(200, 16)).astype(np.float32)
DOCS /= np.linalg.norm(DOCS, axis=1, keepdims=True)
# φ prefers a direction the query only partly shares, so TOUR has somewhere to move
TARGET = DOCS[:5].mean(axis=0)
PHI = {f"d{i}": float(v) for i, v in enumerate(DOCS @ TARGET)}
QUERY = (DOCS[100] + 0.3 * TARGET).astype(np.float32)
# BM25 shares part of the query's direction, so its top docs overlap kNN's in places
BM25 = 10.0 + 5.0 * DOCS @ (DOCS[150:153].mean(axis=0) + 0.5 * QUERY)


class ExactStore:
    """Exact inner-product kNN that records the query vectors it was sent, and a BM25
    whose scores favour another direction than the query's."""

    name = "exact"

    def __init__(self) -> None:
        self.sent: list[np.ndarray] = []
        self.returned: list[str] = []
        self.candidates: list[int | None] = []

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        self.sent.append(np.asarray(vector))
        self.returned.append(returns)
        self.candidates.append(num_candidates)
        order = _within(np.argsort(-(DOCS @ vector), kind="stable"), ids)[:k]
        with_vectors = returns == "vectors"
        return [Hit(f"d{i}", float(DOCS[i] @ vector),
                    {"title": f"d{i}", **({"embedding": DOCS[i]} if with_vectors else {})},
                    DOCS[i] if with_vectors else None) for i in order]


    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        self.returned.append("ids")
        return [Hit(i, 1.0, {"title": i, "embedding": DOCS[int(i[1:])].tolist()}) for i in ids]

    async def bm25(self, index, text, k, *, fields=("title", "text"), ids=None, exclude=(),
                   ids_only=False, keyed=False):
        order = _within(np.argsort(-BM25, kind="stable"), ids)[:k]
        return [Hit(f"d{i}", float(BM25[i]),
                    {} if ids_only or keyed else
                    {"title": f"d{i}", **({} if "embedding" in exclude else
                                          {"embedding": DOCS[i].tolist()})}) for i in order]


def _within(order: np.ndarray, ids) -> np.ndarray:
    """`order` kept to the docs of an ids filter, as the engines apply one."""
    return order if ids is None else np.array([i for i in order if f"d{i}" in set(ids)])


@pytest.fixture
def context(fake_context) -> SearchContext:
    return fake_context(ExactStore(), QUERY, PHI)


async def test_a_pool_leg_visits_as_many_knn_candidates_as_it_returns(context):
    # OpenSearch's default ef_search; twice as many cost engine CPU and moved no ranking
    await build_method("hybrid-linear", context).search("q", 10)
    await build_method("knn", context).search("q", 10)
    assert context.engine.candidates and set(context.engine.candidates) == {100}
    assert knn_candidates(100) == 100 and knn_candidates(10) == 100
    assert knn_candidates(10**6) == MAX_K


async def test_rerank_orders_its_window_by_phi_and_keeps_the_tail_in_knn_order(context):
    knn = await build_method("knn", context).search("q", 50)
    reranked = await build_method("rerank", context, {"k": 10}).search("q", 50)
    window = [h.id for h in knn.hits[:10]]
    assert [h.id for h in reranked.hits[:10]] == sorted(window, key=lambda d: -PHI[d])
    assert [h.id for h in reranked.hits[10:]] == [h.id for h in knn.hits[10:]]
    assert reranked.pairs_scored == 10


@pytest.mark.parametrize("method", ["tour-soft", "rocchio"])
async def test_tour_returns_what_its_last_round_ranked_and_fills_the_depth(context, method):
    result = await build_method(method, context, {"k": 10, "max_rounds": 3}
                                if method != "rocchio" else {"k": 10}).search("q", 50)
    assert len(result.rounds) > 1
    ranking = result.rounds[-1].ranking
    labelled = {d for r in result.rounds for d in r.labelled}
    assert set(ranking) == labelled
    # every labelled doc ranks above every doc the labeler never saw, which fill the depth
    assert [h.id for h in result.hits[: len(ranking)]] == ranking
    assert len(result.hits) == 50 and len({h.id for h in result.hits}) == 50
    # each round reads doc keys and scores, then the text and stored vectors of the k docs
    # it labels; the one call below them reads doc keys and scores alone
    assert context.engine.returned == ["keys", "ids"] * len(result.rounds) + ["keys"]
    assert result.engine_calls == 2 * len(result.rounds) + 1


async def test_a_fused_tours_last_round_scores_the_bm25_fusion_needs(context):
    """Where fusion weighs BM25, a TOUR search known to be in its last round asks its
    labelled docs' BM25 beside that round's text fetch (one round trip, on the sidecar's
    batch), so fusion asks the engine nothing after it: same answer, scores in hand."""
    options = {"k": 10, "budget": 20}
    plain = await build_method("tour-soft", context, options).search("q", 10)
    fused = await build_method("tour-soft", context, {**options, "w_bm25": 1.0}).search("q", 10)
    labelled = [d for r in fused.rounds for d in r.labelled]
    assert len(labelled) == 20 and not plain.lexical_scores
    assert fused.lexical_scores == {d: float(BM25[int(d[1:])]) for d in labelled}
    z = [(np.array(v) - np.mean(v)) / np.std(v) for v in (
        [PHI[d] for d in labelled], [BM25[int(d[1:])] for d in labelled])]
    expected = np.array(labelled)[np.argsort(-(z[0] + z[1]), kind="stable")]
    assert [h.id for h in fused.hits] == expected[:10].tolist()
    # its searches: two rounds' kNN and text; in the last round, the BM25, and the kNN
    # order below the labelled docs, fusion asking for its depth
    assert fused.engine_calls == plain.engine_calls + 2 == 6


async def test_query_vectors_reach_the_engine_at_unit_length(context):
    await build_method("tour-soft", context, {"k": 10, "max_rounds": 3}).search("q")
    assert len(context.engine.sent) > 1
    assert np.allclose([np.linalg.norm(v) for v in context.engine.sent], 1.0, atol=1e-5)


def _min_max(x: np.ndarray) -> np.ndarray:
    return (x - x.min()) / (x.max() - x.min())


@pytest.mark.parametrize("mu", [0.5, 1.0])
async def test_vector_rerank_interpolates_bm25_with_stored_vectors_over_its_window(context, mu):
    bm25 = await build_method("bm25", context).search("q", 50)
    result = await build_method("vector-rerank", context, {"k": 20, "mu": mu}).search("q", 50)
    window = [int(h.id[1:]) for h in bm25.hits[:20]]
    blended = (1 - mu) * _min_max(BM25[window]) + mu * _min_max(DOCS[window] @ QUERY)
    expected = [f"d{window[i]}" for i in np.argsort(-blended, kind="stable")]
    assert [h.id for h in result.hits[:20]] == expected != [h.id for h in bm25.hits[:20]]
    assert [h.id for h in result.hits[20:]] == [h.id for h in bm25.hits[20:]]
    assert result.pairs_scored == 0 and result.parameters == {"k": 20, "mu": mu}
    assert all("embedding" not in h.source for h in result.hits)


async def test_vector_rerank_at_mu_zero_is_bm25(context):
    bm25 = await build_method("bm25", context).search("q", 50)
    result = await build_method("vector-rerank", context, {"k": 20, "mu": 0.0}).search("q", 50)
    assert [h.id for h in result.hits] == [h.id for h in bm25.hits]


def test_interleave_takes_each_rankings_next_unseen_hit_in_turn():
    ranking = [[Hit(i, 0.0) for i in ids] for ids in (["a", "b", "c"], ["b", "d", "e", "f"])]
    assert [h.id for h in interleave(*ranking)] == ["a", "b", "c", "d", "e", "f"]


async def test_rerank_hybrid_labels_half_its_budget_from_each_list_and_ranks_by_phi(context):
    knn = [h.id for h in (await build_method("knn", context).search("q", 100)).hits]
    bm25 = [h.id for h in (await build_method("bm25", context).search("q", 100)).hits]
    assert set(knn[:10]) & set(bm25[:10])  # the fake's lists overlap, so the pool must fill
    result = await build_method("rerank-hybrid", context, {"k": 20}).search("q", 60)
    pool = [h.id for h in result.hits[:20]]
    assert result.pairs_scored == 20 and len(set(pool)) == 20
    # both lists' top 10, filled to 20 from deeper in both: a prefix of each, nothing else
    assert any(set(pool) == set(knn[:a]) | set(bm25[:b])
               for a in range(10, 21) for b in range(10, 21))
    assert pool == sorted(pool, key=lambda d: -PHI[d])
    # below the pool, the rest of the two lists in turn, each doc once
    rest = [h.id for h in interleave(*([Hit(d, 0.0) for d in r] for r in (knn, bm25)))
            if h.id not in pool]
    assert [h.id for h in result.hits[20:]] == rest[:40]


@pytest.mark.parametrize("lexical_weight", [0.0, 1 / 3, 1.0])
async def test_hybrid_linear_ranks_both_lists_union_by_z_scored_bm25_and_similarity(
        context, lexical_weight):
    options = {"k": 30, "depth": 40, "lexical_weight": lexical_weight}
    result = await build_method("hybrid-linear", context, options).search("q", 30)
    unit = QUERY / np.linalg.norm(QUERY)
    union = sorted({*np.argsort(-(DOCS @ unit))[:40], *np.argsort(-BM25)[:40]})
    scores = hybrid_scores(BM25[union], DOCS[union] @ unit, lexical_weight)
    assert [h.id for h in result.hits] == [f"d{union[i]}" for i in np.argsort(-scores)[:30]]
    # two more calls: the kNN-only docs' BM25 and the BM25-only docs' kNN score; the
    # engine's scores rank the union, so no stored vector crosses the wire
    assert result.pairs_scored == 0 and result.engine_calls == 4
    # every call reads ids (or doc keys) and scores: no source, no stored vector crosses
    assert set(context.engine.returned) <= {"ids", "keys"}


async def test_rerank_over_hybrid_linear_labels_its_top_k_and_keeps_the_rest(context):
    first = [h.id for h in (await build_method("hybrid-linear", context).search("q", 60)).hits]
    options = {"k": 10, "first_stage": "hybrid-linear"}
    result = await build_method("rerank", context, options).search("q", 60)
    assert result.pairs_scored == 10
    assert [h.id for h in result.hits[:10]] == sorted(first[:10], key=lambda d: -PHI[d])
    assert [h.id for h in result.hits[10:]] == first[10:]


EXPLORE = {"k": 10, "budget": 30, "max_rounds": 5, "explore": True, "stop": "top10"}


@pytest.mark.parametrize("method", ["tour-hard", "tour-soft"])
async def test_exploring_tour_labels_k_new_docs_each_round_up_to_its_budget(context, method):
    result = await build_method(method, context, {**EXPLORE, "scale": 20.0}).search("q", 50)
    labelled = [r.labelled for r in result.rounds]
    assert [len(ids) for ids in labelled] == [10, 10, 10]
    assert len({d for ids in labelled for d in ids}) == 30 == result.pairs_scored
    assert [r.newly_scored for r in result.rounds] == [10, 10, 10]


async def test_exploring_tour_whose_step_is_negligible_labels_knns_next_k(context):
    knn = [h.id for h in (await build_method("knn", context).search("q", 30)).hits]
    result = await build_method("tour-hard", context,
                                {**EXPLORE, "lr": 1e-6}).search("q", 50)
    assert [r.labelled for r in result.rounds][:2] == [knn[:10], knn[10:20]]


async def test_tour_budget_caps_the_last_rounds_labels(context):
    result = await build_method("tour-soft", context, {**EXPLORE, "budget": 15}).search("q")
    assert [r.newly_scored for r in result.rounds] == [10, 5]


async def test_rocchio_budget_caps_its_second_rounds_labels(context):
    free = await build_method("rocchio", context, {"k": 10}).search("q")
    capped = await build_method("rocchio", context, {"k": 10, "budget": 11}).search("q")
    assert free.pairs_scored > 11  # the update moved q to unlabelled docs
    assert [r.newly_scored for r in capped.rounds] == [10, 1]


async def test_relevance_feedback_labels_the_knn_top_budget_then_searches_once_with_the_formula(
        context):
    knn = await build_method("knn", context).search("q", 50)
    result = await build_method("relevance-feedback", context,
                                {"budget": 20, "k": 20, "c": 2.0}).search("q", 50)
    top = [h.id for h in knn.hits[:20]]
    assert [r.labelled for r in result.rounds] == [top, []] and result.pairs_scored == 20
    # the second search is Qdrant's formula as one vector, over the 20 labelled docs
    unit = QUERY / np.linalg.norm(QUERY)
    C = np.stack([DOCS[int(i[1:])] for i in top])
    moved = feedback_query(unit, C, np.array([PHI[i] for i in top]), 1.0, 1.0, 2.0)
    assert context.engine.sent[-1] == pytest.approx(moved / np.linalg.norm(moved), abs=1e-6)
    # kNN as deep as rerank's, the labelled docs' text and vectors, then the feedback
    # search: ids and scores alone, no source crosses the wire but the labelled docs'
    assert set(context.engine.returned) <= {"ids", "keys"} and result.engine_calls == 3
    # labelled docs first by φ, then the feedback search's other docs in its order
    assert [h.id for h in result.hits[:20]] == sorted(top, key=lambda d: -PHI[d])
    feedback = [f"d{i}" for i in np.argsort(-(DOCS @ moved), kind="stable")]
    assert [h.id for h in result.hits[20:]] == [d for d in feedback if d not in top][:30]
    assert [h.id for h in result.hits[20:]] != [h.id for h in knn.hits[20:]]
    assert result.rounds[0].delta_q_norm > 0 and result.rounds[0].loss_docs == 6


async def test_relevance_feedback_spends_the_budget_past_k_on_the_feedback_searchs_docs(context):
    result = await build_method("relevance-feedback", context, {"budget": 15}).search("q", 30)
    assert [r.newly_scored for r in result.rounds] == [10, 5] and result.pairs_scored == 15
    first, second = (r.labelled for r in result.rounds)
    feedback = [f"d{i}" for i in np.argsort(-(DOCS @ context.engine.sent[-1]), kind="stable")]
    assert second == [d for d in feedback if d not in first][:5]
    assert sum(h.label is not None for h in result.hits) == 15
    small = await build_method("relevance-feedback", context, {"budget": 4}).search("q", 30)
    assert [r.newly_scored for r in small.rounds] == [4, 0]  # k is cut to the budget


@pytest.mark.parametrize("options", [{"a": 0}, {"b": -1}, {"c": float("nan")}, {"pairs": 0},
                                     {"budget": 0}, {"k": None}, {"lam": 0.5}])
def test_relevance_feedback_options_are_checked(context, options):
    with pytest.raises(ConfigError):
        build_method("relevance-feedback", context, options)


@pytest.mark.parametrize(("memory", "loss_docs"), [("round", [10, 10]), ("all", [10, 20])])
async def test_tour_memory_all_puts_every_labelled_doc_in_the_loss(context, memory, loss_docs):
    result = await build_method("tour-soft", context,
                                {**EXPLORE, "memory": memory}).search("q")
    assert [r.loss_docs for r in result.rounds[:2]] == loss_docs


async def test_tour_top10_stop_ends_on_the_round_that_leaves_the_top10_by_phi_alone(context):
    options = {**EXPLORE, "budget": None, "max_rounds": 20, "scale": 20.0, "lr": 0.05}
    result = await build_method("tour-soft", context, options).search("q", 10)
    rankings = [r.ranking for r in result.rounds]  # λ = 1: the top-10 by φ
    assert 2 <= len(rankings) < 21
    assert rankings[-1] == rankings[-2]
    assert all(a != b for a, b in pairwise(rankings[:-1]))


async def test_fusion_reorders_the_labelled_pool_by_phi_bm25_and_knn_scores(context):
    plain = await build_method("rerank-hybrid", context, {"k": 20}).search("q", 30)
    fused = await build_method("rerank-hybrid", context,
                               {"k": 20, "w_bm25": 1.0, "w_dense": 0.5}).search("q", 30)
    labelled = [h.id for h in plain.hits if h.label is not None]
    z = [(np.array(v) - np.mean(v)) / np.std(v) for v in (
        [PHI[i] for i in labelled], [BM25[int(i[1:])] for i in labelled],
        [float(DOCS[int(i[1:])] @ QUERY) for i in labelled])]
    expected = np.array(labelled)[np.argsort(-(z[0] + 1.0 * z[1] + 0.5 * z[2]), kind="stable")]
    assert [h.id for h in fused.hits[:20]] == expected.tolist() != labelled
    assert [h.id for h in fused.hits[20:]] == [h.id for h in plain.hits[20:]]
    assert fused.pairs_scored == plain.pairs_scored
    # the fusion's legs, as deep as it fuses, brought every labelled doc's BM25: it asks
    # their kNN scores alone
    deep = await build_method("rerank-hybrid", context, {"k": 20}).search("q", FUSION_DEPTH)
    assert set(labelled) <= set(deep.lexical_scores)
    assert fused.engine_calls == plain.engine_calls + 1
    assert fused.parameters["w_bm25"] == 1.0


async def test_fusion_at_zero_weights_is_the_method_itself(context):
    plain = build_method("tour-hard", context, {"w_bm25": 0, "w_dense": 0}, by_id=False)
    assert type(plain).__name__ == "TourMethod"


async def test_fusion_weights_take_the_index_settings_names_too(context):
    old = await build_method("rerank-hybrid", context,
                             {"k": 20, "w_bm25": 1.0, "w_dense": 0.5}).search("q", 30)
    new = await build_method("rerank-hybrid", context,
                             {"k": 20, "bm25_weight": 1.0, "dense_weight": 0.5}).search("q", 30)
    assert [h.id for h in new.hits] == [h.id for h in old.hits]
    assert new.parameters["w_bm25"] == 1.0
    with pytest.raises(ConfigError, match=r"given twice, as \[w_bm25\] and \[bm25_weight\]"):
        build_method("rerank", context, {"w_bm25": 0.3, "bm25_weight": 0.3})


def test_tour_and_rocchio_take_the_index_settings_names_of_their_options() -> None:
    tour = TourConfig.from_mapping({"lambda": 0.25, "temperature": 0.3, "threshold": 0.7})
    assert (tour.lam, tour.tau, tour.p) == (0.25, 0.3, 0.7)
    assert RocchioOptions.from_mapping({"lambda": 0.2}).lam == 0.2
    with pytest.raises(ConfigError, match="also lambda for lam"):
        TourConfig.from_mapping({"lamda": 0.2})


@pytest.mark.parametrize("options", [{"w_bm25": -1}, {"w_dense": "x"}])
def test_fusion_weights_are_checked(context, options):
    with pytest.raises(ConfigError, match="w_"):
        build_method("rerank", context, options)


def test_fusion_needs_a_labelling_method(context):
    with pytest.raises(ConfigError, match="labels nothing"):
        build_method("bm25", context, {"w_bm25": 0.3})


def test_a_doc_without_its_stored_vector_is_a_400_that_names_it(fake_context) -> None:
    context = fake_context(object(), np.ones(2), {})
    kept = Hit("d8", 1.0, {"embedding": [0.5, 1.0]})
    with pytest.raises(ConfigError, match=r"doc \[d7\] of \[idx\] has no \[embedding\]") as met:
        context.stored_vectors_of([kept, Hit("d7", 1.0, {"text": "no vector"})])
    assert not isinstance(met.value, VectorUnreadableError)
    assert context.stored_vectors_of([kept])["d8"].tolist() == [0.5, 1.0]


def test_docs_without_vectors_after_the_search_read_one_are_a_400_not_unreadable(
        fake_context) -> None:
    """A search that has read a stored vector can read the field: docs that come without
    one later were indexed so."""
    context = fake_context(object(), np.ones(2), {})
    context.stored_vectors_of([Hit("d8", 1.0, {"embedding": [0.5, 1.0]})])
    with pytest.raises(ConfigError, match=r"doc \[d7\]") as met:
        context.stored_vectors_of([Hit("d7", 1.0, {"text": "no vector"})])
    assert not isinstance(met.value, VectorUnreadableError)


def test_hits_none_of_which_has_a_vector_the_caller_can_read_are_vectors_unreadable(
        fake_context) -> None:
    """As a caller whose field-level security hides the vector field reads every doc."""
    context = fake_context(object(), np.ones(2), {})
    with pytest.raises(VectorUnreadableError):
        context.stored_vectors_of([Hit("d7", 1.0, {"text": "a"}), Hit("d8", 1.0, {})])
    assert context.stored_vectors_of([]) == {}


@pytest.mark.parametrize("name", ["hybrid-linear", "rerank"])
async def test_a_deeper_page_never_reorders_the_hybrid_linear_union(context, name):
    options = {"depth": 20, "first_stage": "hybrid-linear", "k": 5} if name == "rerank" \
        else {"depth": 20}
    shallow = await build_method(name, context, options).search("q", 20)
    deep = await build_method(name, context, options).search("q", 60)
    ids = [h.id for h in deep.hits]
    assert ids[:20] == [h.id for h in shallow.hits] and len(set(ids)) == len(ids) == 60
    scores = [h.score for h in deep.hits[20:]]
    assert max(scores) <= deep.hits[19].score  # the rest sits below the fused union


class EmptyStore(ExactStore):
    """An index with no docs."""

    async def knn(self, index, vector, k, **options):
        return []

    async def bm25(self, index, text, k, **options):
        return []


@pytest.mark.parametrize("name", ["tour-hard", "tour-soft", "rocchio", "relevance-feedback"])
async def test_tour_on_an_empty_index_finds_nothing_without_failing(fake_context, name):
    result = await build_method(name, fake_context(EmptyStore(), QUERY, PHI)).search("q", 10)
    assert result.hits == [] and result.pairs_scored == 0


class CountingEncoder:
    def __init__(self):
        self.calls = 0

    def encode_queries(self, texts):
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32)


async def test_a_shared_query_vector_is_embedded_once_and_given_as_a_copy():
    """evaluate's memo across methods: one model run per text, and a method that moves the
    vector it got (TOUR) leaves the next method's untouched."""

    encoder = CountingEncoder()
    context = SearchContext(None, "idx", encoder, None, query_vectors={})  # type: ignore[arg-type]
    first = await context.embed_query("vitamin d", Timings())
    first += 5.0
    again = await context.embed_query("vitamin d", Timings())
    assert encoder.calls == 1 and again.tolist() == [1.0, 1.0, 1.0]
    await SearchContext(None, "idx", encoder, None).embed_query(  # type: ignore[arg-type]
        "vitamin d", Timings())
    assert encoder.calls == 2  # without the memo (the sidecar's contexts) each call embeds


async def test_fusion_scores_of_no_labelled_docs_call_no_engine(context):
    bm25, dense, calls = await pool_scores(context, "q", [], Timings())
    assert bm25.shape == dense.shape == (0,) and context.engine.sent == [] and calls == 0


async def test_fusion_asks_only_for_the_side_it_weighs_and_the_scores_it_lacks(context):
    ids = ["d3", "d7", "d150"]
    bm25, dense, calls = await pool_scores(context, "q", ids, Timings(),
                                           known_bm25={"d3": 1.5}, dense=False)
    # d3's BM25 was known; the others' asked in one call; no kNN asked for w_dense 0
    assert calls == 1 and context.engine.sent == []
    assert bm25.tolist() == [1.5, float(BM25[7]), float(BM25[150])]
    assert dense.tolist() == [0.0, 0.0, 0.0]


async def test_legs_that_bring_each_others_scores_rank_the_union_with_no_more_calls():
    """A hybrid pool whose legs carry the other retriever's score of each hit
    (`Hit.other_score`) ranks the union as if each missing score had been asked, and asks
    nothing more; a hit without one (a doc with no vector) is still asked for."""
    from es_tour.pipeline._first_stage import linear_union

    asked: list[list[str]] = []

    class Context:
        async def knn(self, vector, k, timings, ids=None, returns="vectors"):
            asked.append(list(ids))
            return []

    async def bm25_of(ids: list[str]) -> list[Hit]:
        asked.append(list(ids))
        return []

    dense = [Hit("a", 0.9, other_score=3.0), Hit("b", 0.8, other_score=0.0)]
    lexical = [Hit("c", 5.0, other_score=0.7), Hit("a", 3.0, other_score=0.9)]
    union, bm25, knn, calls = await linear_union(Context(), np.ones(2), dense, lexical,
                                                 bm25_of, Timings())
    assert [h.id for h in union] == ["a", "c", "b"]
    assert bm25.tolist() == [3.0, 5.0, 0.0] and knn.tolist() == [0.9, 0.7, 0.8]
    assert (calls, asked) == (0, [])
    lexical.append(Hit("d", 1.0))  # no q·c came with it
    *_, calls = await linear_union(Context(), np.ones(2), dense, lexical, bm25_of, Timings())
    assert (calls, asked) == (1, [["d"]])


class DeletingStore(DeletesAKnnHit, ExactStore):
    """The exact store, racing a delete."""


@pytest.mark.parametrize("method", ["tour-hard", "tour-soft", "rocchio"])
async def test_a_doc_deleted_before_its_text_is_read_is_left_out_not_an_error(
        fake_context, method):
    engine = DeletingStore()
    context = fake_context(engine, QUERY, PHI)
    result = await build_method(method, context, {"k": 10}).search("q", 10)
    assert engine.deleted is not None and context.labeler.scored
    assert engine.deleted not in context.labeler.scored
    assert engine.deleted not in {hit.id for hit in result.hits} and len(result.hits) == 10
