"""docs/RESULTS.md and docs/img/*.png from the dict `python -m es_tour.bench` collects.

Nothing in RESULTS.md is written by hand: every figure and every comparison below is
computed here from the run's own measurements.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server
import matplotlib.pyplot as plt

from es_tour.bench import frontier, labelers
from es_tour.bench.retrieval import REFERENCE
from es_tour.metrics import CHANGED, HURT_AT

P1_TOUR, P1_RERANK = "tour-hard:k=10:max_rounds=3", "rerank:k=40"
BM25_RERANK = "rerank:k=100:first_stage=bm25"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]


def _method_rows(methods: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    rows = []
    for label, m in methods.items():
        name = f"{label} (uses judgements)" if m.get("uses_judgements") else label
        rows.append([f"`{name}`", f"{m['ndcg@10']:.4f}", f"{m['recall@100']:.4f}",
                     f"{m['mrr@10']:.4f}", f"{m['latency_ms_p50']:.0f}",
                     f"{m['latency_ms_p95']:.0f}", _cold(m), f"{m['pairs_scored_mean']:.1f}",
                     f"{m['engine_calls_mean']:.1f}", *_robust(m)])
    return rows


def _robust(m: Mapping[str, Any]) -> tuple[str, str]:
    """The robustness index and the share of queries hurt, against REFERENCE (a dash for
    itself, or a run without it)."""
    robust = m.get("robustness")
    if robust is None:
        return "—", "—"
    return f"{robust['index']:+.2f}", f"{100 * robust['hurt_share']:.1f}%"


def _cold(m: Mapping[str, Any]) -> str:
    if "latency_ms_p50_cold" not in m:
        return "—"
    return f"{m['latency_ms_p50_cold']:.0f} / {m['latency_ms_p95_cold']:.0f}"


METHOD_HEADER = ("method", "nDCG@10", "R@100", "MRR@10", "p50 ms", "p95 ms",
                 "cold-labeler p50 / p95 ms", "pairs/query", "engine calls/query",
                 f"robustness index vs {REFERENCE}", f"hurt ≥ {HURT_AT} vs {REFERENCE}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a"


def paper_claims(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """P1 and P2 against the papers' relative claims, in plain words."""
    lines = []
    tour, rerank = methods.get(P1_TOUR), methods.get(P1_RERANK)
    if tour and rerank:
        delta = tour["ndcg@10"] - rerank["ndcg@10"]
        pairs = tour["pairs_scored_mean"] / rerank["pairs_scored_mean"]
        cold = tour.get("latency_ms_p50_cold", tour["latency_ms_p50"]) / rerank.get(
            "latency_ms_p50_cold", rerank["latency_ms_p50"])
        outcome = ("beats" if delta > 0.005 else
                   "matches (within 0.005)" if delta >= -0.005 else "falls short of")
        speed = "faster" if cold < 1 else "slower"
        lines.append(
            f"- **TOUR-hard k=10 (≤3 rounds) against rerank k=40.** The paper: equal "
            f"quality at 1.3–2.4× less time. Here nDCG@10 {tour['ndcg@10']:.4f} against "
            f"{rerank['ndcg@10']:.4f} (Δ {delta:+.4f}): TOUR {outcome} reranking in quality, "
            f"with {pairs:.2f}× the pairs and {cold:.2f}× the cold-labeler p50 time "
            f"({1 / cold:.2f}× {speed})."
        )
    learned, hre, bm25_rerank = (methods.get("learned-agent"), methods.get("hre"),
                                 methods.get(BM25_RERANK))
    if learned and hre:
        delta = (learned["ndcg@10"] - hre["ndcg@10"]) * 100
        pairs = ""
        if bm25_rerank:
            share = _ratio(learned["pairs_scored_mean"], bm25_rerank["pairs_scored_mean"])
            pairs = f"; it scores {share} the pairs of reranking BM25's top-100"
        outcome = ("gains on HRE" if delta >= 0.1 else
                   "ties HRE" if delta > -0.1 else "loses to HRE")
        lines.append(
            f"- **The learned agent against HRE.** HARE reports about +1.4 nDCG points over its "
            f"hybrid environment. Here {learned['ndcg@10']:.4f} against {hre['ndcg@10']:.4f} "
            f"({delta:+.2f} points): the learned agent {outcome}{pairs}."
        )
    return lines


def _sweep_lines(sweeps: Sequence[Mapping[str, Any]], defaults: Mapping[str, Any]) -> list[str]:
    lines = []
    for sweep in sweeps:
        values = list(sweep["ndcg@10"])
        rows = [[f"`{sweep['parameter']}={v}`", f"{sweep['ndcg@10'][v]:.4f}",
                 f"{sweep['pairs'][v]:.1f}"] for v in values]
        key = f"{sweep['base'].split(':')[0]}.{sweep['parameter']}"
        default = None if defaults.get(key) is None else str(defaults[key])
        best = sweep["best"]
        note = (f"best on train: `{best}`; the code's default: `{default}`"
                if default is not None else f"best on train: `{best}`")
        if default in sweep["ndcg@10"] and default != best:
            gap = sweep["ndcg@10"][best] - sweep["ndcg@10"][default]
            note += (f" (the default trails the best by {gap:.4f} here)" if gap > 0
                     else " (a tie: the default stays)")
        lines += [f"**`{sweep['base']}`, varying `{sweep['parameter']}`** — {note}", "",
                  *_table(("setting", "nDCG@10 (train)", "pairs/query"), rows), ""]
    return lines


def plot_frontier(methods: Mapping[str, Mapping[str, Any]], path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, m in methods.items():
        ax.scatter(m["pairs_scored_mean"], m["ndcg@10"],
                   marker="x" if m.get("uses_judgements") else "o")
        ax.annotate(label, (m["pairs_scored_mean"], m["ndcg@10"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("labeler pairs scored per query")
    ax.set_ylabel("nDCG@10")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_latency(methods: Mapping[str, Mapping[str, Any]], path: Path, title: str) -> None:
    labels = list(methods)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.5))
    ax.boxplot([methods[label]["latencies_ms"] for label in labels], orientation="horizontal",
               showfliers=False)
    ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("latency per query, ms (measured; labeler doc vectors cached)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_rounds(methods: Mapping[str, Mapping[str, Any]], path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, m in methods.items():
        if "ndcg@10_per_round" in m:
            ax.plot(range(len(m["ndcg@10_per_round"])), m["ndcg@10_per_round"], marker="o",
                    label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("nDCG@10")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(results: Mapping[str, Any], out: Path) -> Path:
    """Writes out/RESULTS.md and out/img/*.png; returns the markdown's path."""
    images = out / "img"
    images.mkdir(parents=True, exist_ok=True)
    engines = results["engines"]
    cost = results["labeler_cost"]
    lines = [
        "# Results",
        "",
        "Regenerated by `make bench`; never edited by hand.",
        "",
        f"- command: `{results['command']}`",
        f"- date: {results['date']}; run time {results['seconds'] / 60:.1f} min",
        f"- machine: {results['machine']}",
        "- engines: " + ", ".join(f"{name} {e['version']}" for name, e in engines.items()),
        f"- data: {results['dataset']}, split `test` ({results['test_queries']} queries); "
        f"sweeps on `train` only",
        f"- retriever: `{results['retriever']}`; labeler: `{cost['name']}`",
        "",
        "**How latency is measured, and which store state it is.** The dual-encoder "
        "labeler reads doc vectors it cached for the corpus, so the *p50 / p95* columns are "
        "a **warm store** (every doc's vector held, as after `es-tour warm`): the engine, "
        "the query encodings and our own code, no doc encoding. A labeler that must encode "
        f"each new doc at query time costs {cost['ms_per_doc']:.1f} ms per doc on this "
        f"machine (measured on {cost['docs_timed']} SciFact docs in this run), so the "
        "*cold-labeler* columns are **no reuse** (no store, nothing cached): they add each "
        "query's new docs × that cost. An empty store lies between, and "
        "[benchmarks/cost.md](benchmarks/cost.md) measures all three through the sidecar. "
        "Pairs scored are counted per search either way. The cross-encoder section below "
        "has nothing cached: its latency is measured.",
        "",
        f"**Robustness** columns compare each method with `{REFERENCE}`, the labeler-free "
        "pool, query by query on the same test queries: the robustness index is (queries "
        f"better − queries worse, by more than {CHANGED} nDCG@10) / queries, from −1 to +1; "
        f"*hurt* is the share of queries whose nDCG@10 falls by {HURT_AT} or more.",
        "",
    ]
    first = next(iter(engines))
    for name, engine in engines.items():
        methods = engine["methods"]
        lines += [f"## Quality and cost on {name} {engine['version']}", "",
                  *_table(METHOD_HEADER, _method_rows(methods)), ""]
    methods = engines[first]["methods"]
    lines += ["## Against the papers", "", *paper_claims(methods), ""]
    lines += labelers_section(out / "benchmarks" / "labelers.json")
    lines += frontier.results_section(out / "benchmarks" / "frontier.json")
    plots = {"frontier": plot_frontier, "latency": plot_latency, "rounds": plot_rounds}
    for kind, draw in plots.items():
        draw(methods, images / f"{kind}.png", f"SciFact test on {first}")
    lines += ["![nDCG@10 against pairs scored](img/frontier.png)", "",
              "![latency per method](img/latency.png)", "",
              "![nDCG@10 per round](img/rounds.png)", ""]
    per_round = [[f"`{label}`", *(f"{v:.4f}" for v in m["ndcg@10_per_round"])]
                 for label, m in methods.items() if "ndcg@10_per_round" in m]
    if per_round:
        width = max(len(row) for row in per_round) - 1
        lines += ["### nDCG@10 per round", "",
                  *_table(("method", *(f"round {t}" for t in range(width))),
                          [row + [""] * (width + 1 - len(row)) for row in per_round]), ""]
    if results.get("operators"):
        ops = results["operators"]
        kinds = sorted({kind for counts in ops.values() for kind in counts})
        lines += ["### Δq operators chosen", "",
                  *_table(("policy", *kinds),
                          [[who, *(counts.get(kind, 0) for kind in kinds)]
                           for who, counts in ops.items()]), ""]
    if results.get("cross_encoder"):
        cross = results["cross_encoder"]
        lines += [f"## With the fine-tuned cross-encoder ({cross['name']}, {cross['precision']})",
                  "", f"{cross['queries']} test queries on {first}; latency measured, nothing "
                  "cached between searches.", "",
                  *_table(METHOD_HEADER, _method_rows(cross["methods"])), "",
                  *paper_claims(cross["methods"]), ""]
    lines += ["## Hyper-parameters (train split only)", "",
              f"One parameter at a time around the base setting, on {results['sweep_queries']} "
              "train queries the learned agent was not trained on; OpenSearch.", "",
              *_sweep_lines(results["sweeps"], results["defaults"])]
    ingest = results["ingest"]
    lines += ["## Ingest", "",
              f"{ingest['docs']} SciFact docs with `{results['retriever']}`, each measured "
              "twice, alternating, in one run:", "",
              *_table(("path", "docs/s"),
                      [["embedding alone", ingest["embed_docs_per_s"]],
                       ["embedding + bulk indexing", ingest["ingest_docs_per_s"]]]), "",
              f"Ingest runs at {ingest['ratio']:.2f}× the embedding rate.", ""]
    if results.get("models_markdown"):
        lines += ["## Models", "", _demote(results["models_markdown"]), ""]
    if results.get("proxy_markdown"):
        lines += ["## Proxy", "", _demote(results["proxy_markdown"]), ""]
    path = out / "RESULTS.md"
    path.write_text("\n".join(lines))
    return path


def labelers_section(path: Path) -> list[str]:
    """The labelers' report (`python -m es_tour.bench.labelers`) between its markers, from
    the json it wrote, so a regenerated page keeps it."""
    if not path.is_file():
        return []
    return [labelers.SECTION_START, labelers.markdown(json.loads(path.read_text())),
            labelers.SECTION_END, ""]


def _demote(markdown: str) -> str:
    """A sub-report's headings one level down, its title dropped."""
    kept = [line for line in markdown.splitlines() if not line.startswith("# ")]
    return "\n".join("#" + line if line.startswith("#") else line for line in kept).strip()
