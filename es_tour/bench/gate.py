"""When does refining rank worse than its labeler-free pool? A study on train of the signals
a refined search has in hand when it answers, and of the gates they support.

Each train query runs the recommended refined search (es_tour/recommended.py: hybrid-tour,
20 labeler pairs, fused with its weights) and hybrid-linear, the pool it refines, which
labels nothing. The gain is the refined nDCG@10 less the pool's; a query is hurt when the
gain is -0.2 or worse. The signals, each from the labelled docs and the two rankings:

- `agreement`: Spearman's rho between the labeler's φ and the pool's hybrid score;
- `phi_top`, `phi_margin`, `phi_spread`: the best φ, its lead over the second, φ's spread;
- `overlap`: the share of the refined top 10 that the pool's top 10 holds;
- `lift`: how far the refined top 10's mean φ rises over the pool's top 10 (labelled docs);
- `query_terms`: the query's length in words.

The study part of train (tune's fit queries) gives each signal's rank correlation with
the gain and its AUC for a hurt query and for a loss; a gate, refine where one signal
clears a threshold and keep the pool's order otherwise, is fitted there. The gates, and
constant blends that trust φ less (the fusion weights raised by b times the pool's own),
are then measured on tune's validation queries, which the fit never read, and reported
on test, which no choice reads.

    python -m es_tour.bench.gate --dataset ../shared/datasets/scifact
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from es_tour.bench._commands import bench_parser, portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodSpec
from es_tour.metrics import CHANGED, HURT_AT, ndcg_at_k, robustness
from es_tour.pipeline import LEXICAL_WEIGHT
from es_tour.recommended import FRONTIER_LABEL
from es_tour.tour import hybrid_scores
from es_tour.training._parity import spearman
from es_tour.tuning import LinearPool, Part, Pool, linear_pools, pools, splits

SIGNALS = ("agreement", "phi_top", "phi_margin", "phi_spread", "overlap", "lift",
           "query_terms")
BLENDS = (0.5, 1.0, 2.0)  # b: the pool's weights (λ, 1 − λ) added b times to fusion's
THRESHOLD_QUANTILES = np.linspace(0.05, 0.6, 12)  # a gate falls back on at most 60%
TOP = 10
RECOMMENDED = MethodSpec.parse(FRONTIER_LABEL)
FUSION = ("w_bm25", "w_dense")


@dataclass(frozen=True)
class QueryStudy:
    """One query: the nDCG@10 of both rankings, the signals, and its judgements."""

    refined_ndcg: float
    pool_ndcg: float
    signals: dict[str, float]
    judgements: Mapping[str, int] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        return self.refined_ndcg - self.pool_ndcg


def rank_agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho; 0 where either side is constant (no ordering to agree with)."""
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return spearman(np.asarray(a), np.asarray(b))


def signals(text: str, found: Pool, refined: Sequence[str], pool: Sequence[str]
            ) -> dict[str, float]:
    """`SIGNALS` of one query: its labelled docs (`found`) and the two rankings."""
    phi = np.sort(found.phi)[::-1]
    by_id = dict(zip(found.ids, found.phi.tolist(), strict=True))
    labelled_top = [by_id[doc] for doc in pool[:TOP] if doc in by_id]
    return {
        "agreement": rank_agreement(found.phi.tolist(),
                              hybrid_scores(found.bm25, found.dense, LEXICAL_WEIGHT).tolist()),
        "phi_top": float(phi[0]) if len(phi) else 0.0,
        "phi_margin": float(phi[0] - phi[1]) if len(phi) > 1 else 0.0,
        "phi_spread": float(found.phi.std()) if len(phi) else 0.0,
        "overlap": len(set(refined[:TOP]) & set(pool[:TOP])) / TOP,
        "lift": (float(np.mean([by_id[doc] for doc in refined[:TOP] if doc in by_id])
                       - np.mean(labelled_top)) if labelled_top else 0.0),
        "query_terms": float(len(text.split())),
    }


def auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """The chance a positive scores above a negative; 0.5 where one side is empty."""
    if all(positive) or not any(positive):
        return 0.5
    return float(roc_auc_score(positive, scores))


@dataclass(frozen=True)
class Gate:
    """Refine where `signal` clears `threshold` (at or above it, or at or below it when
    `below`), and keep the pool's order otherwise; no threshold refines every query."""

    signal: str
    threshold: float | None
    below: bool = False

    def refines(self, study: QueryStudy) -> bool:
        if self.threshold is None:
            return True
        value = study.signals[self.signal]
        return value <= self.threshold if self.below else value >= self.threshold


@dataclass(frozen=True)
class Outcome:
    """A way of answering, over a set of queries, against the pool."""

    ndcg: float
    index: float
    hurt_share: float
    refined_share: float


Choice = Callable[[str, QueryStudy], float]  # (query id, its study) -> the nDCG@10 answered


def refined(_: str, study: QueryStudy) -> float:
    return study.refined_ndcg


def pooled(_: str, study: QueryStudy) -> float:
    return study.pool_ndcg


def outcome(studies: Mapping[str, QueryStudy], choose: Choice) -> Outcome:
    """`choose` gives each query's nDCG@10; the share refined is of the queries whose
    nDCG@10 differs from the pool's."""
    ndcg = {qid: choose(qid, study) for qid, study in studies.items()}
    pool = {qid: study.pool_ndcg for qid, study in studies.items()}
    against = robustness(ndcg, pool)
    moved = sum(ndcg[qid] != pool[qid] for qid in studies)
    return Outcome(float(np.mean(list(ndcg.values()))), against.index, against.hurt_share,
                   moved / len(studies) if studies else 0.0)


def gated(gate: Gate) -> Choice:
    return lambda _, study: study.refined_ndcg if gate.refines(study) else study.pool_ndcg


def fit_gate(studies: Mapping[str, QueryStudy], signal: str) -> tuple[Gate, Outcome]:
    """The threshold on `signal` (either direction, at `THRESHOLD_QUANTILES` of its
    values) with the best robustness index whose mean nDCG@10 is at least refining
    everything's; refining everything when none is."""
    everything = outcome(studies, refined)
    values = np.array([study.signals[signal] for study in studies.values()])
    best = (Gate(signal, None), everything)
    for below in (False, True):
        quantiles = 1 - THRESHOLD_QUANTILES if below else THRESHOLD_QUANTILES
        for threshold in np.quantile(values, quantiles):
            gate = Gate(signal, float(threshold), below)
            found = outcome(studies, gated(gate))
            if found.ndcg >= everything.ndcg - 1e-9 and found.index > best[1].index + 1e-9:
                best = (gate, found)
    return best


PARTS: dict[Part, str] = {"fit": "study", "validation": "held out", "report": "test"}


async def collect(dataset: BeirDataset, url: str, engine: str
                  ) -> tuple[dict[str, dict[str, QueryStudy]], dict[str, dict[str, Pool]]]:
    """Per part (`PARTS`): each query's study, and its labelled docs (`Pool`)."""
    parts = splits(dataset)
    spec = MethodSpec(RECOMMENDED.label, RECOMMENDED.name,
                      {key: value for key, value in RECOMMENDED.options.items()
                       if key not in FUSION})
    w_bm25, w_dense = fusion_weights()
    studies: dict[str, dict[str, QueryStudy]] = {}
    labelled: dict[str, dict[str, Pool]] = {}
    async with corpus_context(dataset, url, engine) as context:
        for part in PARTS:
            queries = parts.queries(dataset, part)
            qrels = dataset.qrels(parts.report if part == "report" else parts.fit)
            found = await pools(context, spec, queries)
            linear: dict[str, LinearPool] = await linear_pools(context, queries)
            studies[part] = {}
            for qid, text in queries.items():
                ranking = found[qid].ranking(w_bm25, w_dense)
                pool = linear[qid].ranking(LEXICAL_WEIGHT)
                studies[part][qid] = QueryStudy(
                    ndcg_at_k(ranking, qrels.get(qid, {})),
                    ndcg_at_k(pool, qrels.get(qid, {})),
                    signals(text, found[qid], ranking, pool), qrels.get(qid, {}))
            labelled[part] = found
    return studies, labelled


def fusion_weights(b: float = 0.0) -> tuple[float, float]:
    """The recommended fusion weights, raised by b times the pool's own (λ, 1 − λ)."""
    w_bm25, w_dense = (float(RECOMMENDED.options.get(key, 0.0)) for key in FUSION)
    return w_bm25 + b * LEXICAL_WEIGHT, w_dense + b * (1 - LEXICAL_WEIGHT)


def combined_auc(studies: Mapping[str, QueryStudy]) -> float:
    """Cross-validated (5 folds) AUC of a logistic model on every signal, for a loss
    against a gain, among the queries whose nDCG@10 changed."""
    changed = [study for study in studies.values() if abs(study.gain) > CHANGED]
    features = np.array([[study.signals[name] for name in SIGNALS] for study in changed])
    lost = np.array([study.gain < 0 for study in changed])
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    predicted = cross_val_predict(model, features, lost, cv=5, method="predict_proba")
    return auc(predicted[:, 1].tolist(), lost.tolist())


def analyse(studies: Mapping[str, Mapping[str, QueryStudy]],
            labelled: Mapping[str, Mapping[str, Pool]]) -> dict[str, Any]:
    """Each signal's power on the study part, the gate fitted there on every part, and
    the blends on every part."""
    fit = studies["fit"]
    changed = [study for study in fit.values() if abs(study.gain) > CHANGED]
    hurt = [study.gain <= -HURT_AT + 1e-9 for study in fit.values()]
    rows: list[dict[str, Any]] = []
    for name in SIGNALS:
        gate, _ = fit_gate(fit, name)
        rows.append({"signal": name,
                     "rho_with_gain": rank_agreement([s.signals[name] for s in fit.values()],
                                               [s.gain for s in fit.values()]),
                     "auc_hurt": auc([s.signals[name] for s in fit.values()], hurt),
                     "auc_loss_changed": auc([s.signals[name] for s in changed],
                                             [s.gain < 0 for s in changed]),
                     "gate": asdict(gate),
                     **{part: asdict(outcome(studies[part], gated(gate))) for part in PARTS}})

    def blend(part: str, b: float) -> Outcome:
        weights = fusion_weights(b)
        return outcome(studies[part], lambda qid, study: ndcg_at_k(
            labelled[part][qid].ranking(*weights), study.judgements))

    return {"baselines": {part: {"refined": asdict(outcome(studies[part], refined)),
                                 "pool": asdict(outcome(studies[part], pooled))}
                          for part in PARTS},
            "changed_queries": len(changed), "combined_auc_loss_changed": combined_auc(fit),
            "signals": rows,
            "blends": [{"b": b, **{part: asdict(blend(part, b)) for part in PARTS}}
                       for b in BLENDS]}


def markdown(report: Mapping[str, Any]) -> str:
    def cells(o: Mapping[str, float]) -> str:
        return f"{o['ndcg']:.4f} | {o['index']:+.3f} | {o['hurt_share']:.1%}"

    parts = " | ".join(f"{label}: nDCG@10 | index | hurt" for label in PARTS.values())
    lines = ["# When refining hurts: signals and gates", "",
             "Written by `python -m es_tour.bench.gate`; never edited by hand.", "",
             f"- command: `{report['command']}`",
             f"- date: {report['date']}; machine: {report['machine']}; engine: "
             f"{report['engine']}",
             f"- refined: `{report['method']}`; pool: hybrid-linear (no labeler)",
             f"- study: {report['queries']['fit']} train queries (tune's fit); held out: "
             f"{report['queries']['validation']} other train queries (tune's validation); "
             f"test: {report['queries']['report']} queries, read for this page's figures "
             "only, never for a choice",
             "- index: (wins − losses) / queries against the pool, a change being over "
             f"{CHANGED}; hurt: the share of queries {HURT_AT} or more below the pool", "",
             "## Refining every query", "",
             "| answer | " + parts + " |", "|---|" + "---|" * 3 * len(PARTS)]
    for answer in ("pool", "refined"):
        lines.append(f"| {answer} | " + " | ".join(
            cells(report["baselines"][part][answer]) for part in PARTS) + " |")
    lines += ["", "## Signals", "",
              "On the study part: each signal's Spearman's rho with the gain over the pool; "
              "its AUC for a hurt query (0.5: chance; below 0.5, low values predict it); "
              f"and, among the {report['changed_queries']} queries whose nDCG@10 changed, "
              "its AUC for a loss against a gain. All signals together (a logistic model, "
              "cross-validated in 5 folds) reach an AUC of "
              f"{report['combined_auc_loss_changed']:.3f} for a loss against a gain. The "
              "gate, refine where the signal clears a threshold and keep the pool's order "
              "otherwise, is the study part's best index at no loss of mean nDCG@10.", "",
              "| signal | rho with gain | AUC hurt | AUC loss, changed | gate | " + parts
              + " |", "|---|---|---|---|---|" + "---|" * 3 * len(PARTS)]
    for row in report["signals"]:
        gate = row["gate"]
        rule = ("refine all" if gate["threshold"] is None else
                f"refine if {'≤' if gate['below'] else '≥'} {gate['threshold']:.4g}")
        lines.append(f"| `{row['signal']}` | {row['rho_with_gain']:+.3f} | "
                     f"{row['auc_hurt']:.3f} | {row['auc_loss_changed']:.3f} | {rule} | "
                     + " | ".join(cells(row[part]) for part in PARTS) + " |")
    lines += ["", "## Trusting φ less", "",
              "Every query refined, its labelled docs ranked with the fusion weights raised "
              f"by b times the pool's own ({LEXICAL_WEIGHT} on BM25, "
              f"{1 - LEXICAL_WEIGHT:.1f} on kNN).", "",
              "| b | " + parts + " |", "|---|" + "---|" * 3 * len(PARTS)]
    lines += [f"| {row['b']} | " + " | ".join(cells(row[part]) for part in PARTS) + " |"
              for row in report["blends"]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, engines=("opensearch",))
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args(argv)
    studies, labelled = asyncio.run(collect(BeirDataset(args.dataset), args.opensearch,
                                            "opensearch"))
    report = {"command": portable_command("python -m es_tour.bench.gate",
                                          sys.argv[1:] if argv is None else list(argv)),
              "date": now(), "machine": machine(), "engine": "opensearch",
              "method": RECOMMENDED.label,
              "queries": {part: len(studies[part]) for part in PARTS},
              **analyse(studies, labelled)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gate.json").write_text(json.dumps(report, indent=1))
    (args.out / "gate.md").write_text(markdown(report))
    print(f"wrote {args.out / 'gate.md'}")


if __name__ == "__main__":
    main()
