"""Candidate Δq and their features, RM3 weights and nDCG: pure functions over term statistics.

Terms come from the index's own analyzer (term vectors) and are ranked by the index's IDF.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from es_tour.agents._environment import Action, TourStep
from es_tour.agents._grammar import KINDS, WEIGHTS, Query, Refinement
from es_tour.engines import TermStats

# Per candidate: its kind of Δq (an index into KINDS: trees split on it), how the term
# sits in A_t and in the best docs by φ, and the state's φ spread and round.
FEATURES: tuple[str, ...] = (
    "kind", "idf", "a_doc_fraction", "a_log_tf", "a_best_rank_inv", "phi_mean", "phi_max",
    "phi_share", "phi_gap", "top_fraction", "rm3", "in_q0", "round", "phi_spread",
    "phi_range",
)
TOP_DOCS = 3  # the best docs of A_t by φ, for `top_fraction`
ACTION_KINDS = (*KINDS, TourStep.kind)  # the `kind` feature indexes this
# what TOUR's step has of a candidate's features: no term, so its kind and the state's
_STEP_COLUMNS = [FEATURES.index(name) for name in ("kind", "round", "phi_spread", "phi_range")]
_LETTER = re.compile(r"[^\W\d_]")


def positive_refinements(terms: Iterable[str], m: int) -> list[Refinement]:
    """`term`, `+term` and `term^w` for each of the first `m` terms."""
    chosen = list(terms)[:m]
    return [
        *(Refinement(t, "should") for t in chosen),
        *(Refinement(t, "must") for t in chosen),
        *(Refinement(t, "should", w) for w in WEIGHTS for t in chosen),
    ]


def negative_refinements(terms: Iterable[str], m: int) -> list[Refinement]:
    return [Refinement(t, "must_not") for t in list(terms)[:m]]


def by_idf(vocabulary: Iterable[str], stats: TermStats, exclude: Iterable[str] = (),
           limit: int | None = None) -> list[str]:
    """The `limit` word-like terms of highest IDF (lowest df), ties by name.

    Terms in one doc of the index are dropped: such a term can only retrieve that doc.
    """
    excluded, df = set(exclude), stats.df
    kept = [(df[t], t) for t in vocabulary
            if df.get(t, 0) >= 2 and t not in excluded and is_word(t)]
    ranked = heapq.nsmallest(limit, kept) if limit is not None else sorted(kept)
    return [t for _, t in ranked]


def is_word(term: str) -> bool:
    """At least two characters and at least one letter: not `2`, `25.8` or `t`."""
    return len(term) >= 2 and _LETTER.search(term) is not None


def vocabulary(stats: TermStats, docs: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for doc in docs:
        found.update(stats.tf.get(doc, {}))
    return found


def rm3_weights(stats: TermStats, docs: Sequence[str], phi: Sequence[float],
                max_df_fraction: float = 1.0) -> dict[str, float]:
    """RM3's relevance model P(w|R) = Σ_d P(w|d) P(d|q) over feedback docs.

    P(w|d) = tf(w, d) / |d| (maximum likelihood); P(d|q) is φ min-max normalised over the
    docs and summed to one (uniform when every φ is equal). Terms held by more than
    `max_df_fraction` of the index get no weight (RM3's usual stop filter). docs: (n,),
    phi: (n,).
    """
    weights = _normalised_phi(phi)
    total = weights.sum()
    prior = weights / total if total > 0 else np.full(len(docs), 1.0 / max(len(docs), 1))
    model: dict[str, float] = {}
    for doc, p_doc in zip(docs, prior, strict=True):
        counts = stats.tf.get(doc, {})
        length = sum(counts.values())
        if not length:
            continue
        for term, tf in counts.items():
            if stats.df.get(term, 0) > max_df_fraction * stats.doc_count:
                continue
            model[term] = model.get(term, 0.0) + float(p_doc) * tf / length
    return model


def candidate_features(
    candidates: Sequence[Action], stats: TermStats, answer: Sequence[str],
    phi: Sequence[float], q0_terms: Iterable[str], round_fraction: float,
) -> np.ndarray:
    """(n, len(FEATURES)) float64 features of n candidates in the state (A_t, φ).

    answer: (k,) the ids of A_t best first; phi: (k,) their φ. TOUR's step has no term:
    its row holds its kind and the state's features only.
    """
    raw = np.asarray(phi, dtype=np.float64).reshape(-1)
    phi_n = _normalised_phi(phi)
    rm3 = rm3_weights(stats, answer, phi)
    rm3_max = max(rm3.values(), default=0.0) or 1.0
    idf_max = math.log(1.0 + (stats.doc_count + 0.5) / 0.5) if stats.doc_count else 1.0
    q0 = set(q0_terms)
    terms = [c for c in candidates if isinstance(c, Refinement)]
    wanted = {candidate.term for candidate in terms}
    holders: dict[str, list[int]] = {term: [] for term in wanted}
    for rank, doc in enumerate(answer):
        for term in wanted.intersection(stats.tf.get(doc, {})):
            holders[term].append(rank)
    spread = float(raw.std()) if raw.size else 0.0
    span = float(raw.max() - raw.min()) if raw.size else 0.0
    top = min(TOP_DOCS, len(answer)) or 1
    out = np.zeros((len(candidates), len(FEATURES)), dtype=np.float64)
    for row, candidate in enumerate(candidates):
        if isinstance(candidate, TourStep):
            out[row, _STEP_COLUMNS] = (ACTION_KINDS.index(candidate.kind), round_fraction,
                                         spread, span)
            continue
        term = candidate.term
        ranks = holders.get(term, [])
        tf = sum(stats.tf.get(answer[r], {}).get(term, 0) for r in ranks)
        held = phi_n[ranks] if ranks else np.zeros(1)
        others = np.delete(phi_n, ranks) if ranks else phi_n
        gap = (float(held.mean()) - float(others.mean())
               if ranks and others.size else 0.0)
        out[row] = (
            ACTION_KINDS.index(candidate.kind),
            stats.idf(term) / idf_max,
            len(ranks) / max(len(answer), 1),
            math.log1p(tf),
            1.0 / (1.0 + min(ranks)) if ranks else 0.0,
            float(held.mean()) if ranks else 0.0,
            float(held.max()) if ranks else 0.0,
            float(held.sum() / phi_n.sum()) if ranks and phi_n.sum() > 0 else 0.0,
            gap,
            sum(r < top for r in ranks) / top,
            rm3.get(term, 0.0) / rm3_max,
            1.0 if term in q0 else 0.0,
            round_fraction,
            spread,
            span,
        )
    return out


def query_terms(query: Query, q0_tokens: Iterable[str]) -> set[str]:
    """Every term q_t already uses: q0's analysed tokens and the refinement terms."""
    return set(q0_tokens) | set(query.terms)


def _normalised_phi(phi: Sequence[float]) -> np.ndarray:
    values = np.asarray(phi, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return values
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.ones_like(values)
