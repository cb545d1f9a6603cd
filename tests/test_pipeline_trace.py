"""What every method's trace says about its hits and rounds: the round that first found a
hit, the retrievers that returned it, its φ, each round's new docs and top-10 labeler mass.
"""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.engines import Hit
from es_tour.pipeline import Provenance, RankedHit, SearchContext, build_method, trace_dict

rng = np.random.default_rng(11)
DOCS = rng.normal(size=(60, 8)).astype(np.float32)
DOCS /= np.linalg.norm(DOCS, axis=1, keepdims=True)
PHI = {f"d{i}": float(v) for i, v in enumerate(DOCS @ DOCS[:3].mean(axis=0))}


class Store:
    """Exact kNN over DOCS; BM25 returns d40, d41, … in order (d40..d44 are also near q)."""

    name = "store"

    async def knn(self, index, vector, k, *, num_candidates=None, field="embedding", ids=None,
                  returns="vectors"):
        order = np.argsort(-(DOCS @ vector), kind="stable")[:k]
        return [Hit(f"d{i}", float(DOCS[i] @ vector), {"title": f"d{i}"},
                    DOCS[i] if returns == "vectors" else None) for i in order]

    async def docs_by_id(self, index, ids, *, exclude=(), include=None, vectors=True):
        return [Hit(d, 0.0, {"title": d}, DOCS[int(d[1:])]) for d in ids]

    async def bm25(self, index, text, k, *, fields, ids=None, exclude=(), ids_only=False,
                   keyed=False):
        return [Hit(f"d{i}", float(100 - i), {"title": f"d{i}"}) for i in range(40, 40 + k)]


@pytest.fixture
def context(fake_context) -> SearchContext:
    return fake_context(Store(), DOCS[40], PHI)  # q is d40: kNN and BM25 both rank it first


async def test_knn_and_bm25_hits_come_from_round_zero_by_their_retriever(context) -> None:
    for name in ("knn", "bm25"):
        result = await build_method(name, context, {"k": 5}).search("q", 5)
        assert {(h.round, h.retrieved_by, h.label) for h in result.hits} == {(0, (name,), None)}
        (only,) = result.rounds
        assert only.ranking == [h.id for h in result.hits]
        assert only.new_docs == 5 and only.label_mass_at_10 is None


async def test_hybrid_marks_docs_both_retrievers_returned(context) -> None:
    result = await build_method("hybrid-rrf", context, {"k": 5}).search("q", 5)
    by_id = {h.id: h.retrieved_by for h in result.hits}
    assert by_id["d40"] == ("bm25", "knn")
    assert {("bm25",), ("knn",)} & set(by_id.values())  # some came from one retriever only
    union = {f"d{i}" for i in range(40, 45)} | {h.id for h in await context.engine.knn(
        "idx", DOCS[40], 5)}
    assert result.rounds[0].new_docs == len(union)


async def test_rerank_hits_carry_phi_and_the_round_its_label_mass(context) -> None:
    result = await build_method("rerank", context, {"k": 10}).search("q", 10)
    assert all(h.label == pytest.approx(PHI[h.id]) for h in result.hits)
    assert result.rounds[0].label_mass_at_10 == pytest.approx(
        sum(PHI[h.id] for h in result.hits), abs=1e-5)


async def test_tour_hits_show_the_round_that_first_found_them(context) -> None:
    # the paper's rounds retrieve exactly the k docs they label, which the trace lists
    options = {"k": 5, "max_rounds": 3, "explore": False, "stop": "top1"}
    result = await build_method("tour-soft", context, options).search("q", 20)
    found: dict[str, int] = {}
    for trace in result.rounds:
        top = trace.top_ids
        assert trace.new_docs == len(set(top) - set(found))
        for doc in top:
            found.setdefault(doc, trace.round)
        assert trace.label_mass_at_10 == pytest.approx(
            sum(PHI[d] for d in trace.ranking[:10]), abs=1e-5)
    for hit in result.hits:
        assert hit.retrieved_by == ("knn",)
        if hit.id in found:  # labelled in a round
            assert hit.round == found[hit.id] and hit.label == pytest.approx(PHI[hit.id])
        else:  # filled in below them by the final query's kNN
            assert hit.round == result.rounds[-1].round and hit.label is None


def test_provenance_counts_new_docs_once_and_keeps_the_first_round() -> None:
    provenance = Provenance()
    assert provenance.add(0, ["a", "b"], "knn") == 2
    assert provenance.add(1, ["b", "c"], "bm25") == 1
    stamped = provenance.stamp(RankedHit("b", 1.0), {"b": 0.5})
    assert (stamped.round, stamped.retrieved_by, stamped.label) == (0, ("bm25", "knn"), 0.5)
    assert stamped.trace() == {"_id": "b", "round": 0, "retrieved_by": ["bm25", "knn"],
                               "label": 0.5}
    assert provenance.stamp(RankedHit("z", 1.0), {}).round is None


async def test_one_serializer_writes_every_family_with_timings_flat_and_unset_facts_out(context):
    tour = await build_method("tour-hard", context, {"k": 10, "max_rounds": 2, "explore": True,
                                                      "stop": "top10"}).search("q", size=10)
    rounds = tour.to_dict()["rounds"]
    assert [r["round"] for r in rounds] == [t.round for t in tour.rounds]
    for trace, out in zip(tour.rounds, rounds, strict=True):
        assert out == trace_dict(trace)
        assert out["labelled"] == trace.labelled and out["ranking"] == trace.ranking
        assert {"engine_ms", "model_ms", "own_ms", "total_ms"} <= out.keys()
        assert "timings" not in out
        # a round that moved the query says how far; the one that stopped says nothing
        assert ("delta_q_norm" in out) == (trace.delta_q_norm is not None)
    assert "delta_q_norm" in rounds[0] and "delta_q_norm" not in rounds[-1]
    first_stage = (await build_method("knn", context, {"k": 5}).search("q", 5)).to_dict()
    assert "label_mass_at_10" not in first_stage["rounds"][0]  # knn labels nothing
    assert "labelled" not in first_stage["rounds"][0]  # and has no TOUR fields
