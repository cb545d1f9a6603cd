"""What each candidate labeler buys, from the budget frontier's runs: P1a (es-tour's best
against rerank-of-hybrid and relevance feedback at equal budget, same labeler), P1b (the
best multi-round method against the best single-round one), P2 (the learned agent
against HRE, query by query), each labeler's cost and its robustness against plain
hybrid-linear. Runs the few test searches the frontier lacks (hybrid-linear, HRE, the
learned agent, each labeler's chosen method timed query by query), then writes
docs/benchmarks/labelers.md, its JSON, and docs/RESULTS.md's section between its markers:

    python -m es_tour.bench.labelers --dataset ../shared/datasets/scifact \\
        --opensearch http://127.0.0.1:9200 --out docs

The learned agent of P2 runs a policy trained with the labeler it is measured with: by
default one trained here on train (`--policy-queries`, all of them unless given) and
stored as `labelers-<labeler>`; `--policy NAME` takes one `es-tour train-agent --labeler`
made instead, after checking its manifest names that labeler and the train split.
It also compares, query by query, each budget's best method with the chosen labeler
against the same with the default labeler (the first candidate): the chosen one's gain,
with a bootstrap 95% interval of its mean. `--only p2,gain` re-measures those parts
alone and keeps the rest of the JSON the last run wrote (its cost figures among them).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.agents import policy_dir
from es_tour.bench._commands import bench_parser, parsed_command
from es_tour.bench._machine import machine, now
from es_tour.bench.frontier import (
    BUDGETS,
    CHOICE_BUDGET,
    FEEDBACK,
    METHODS,
    chosen,
    frontier_per_budget,
    labeler_runs,
    new_to_train,
)
from es_tour.bench.tour_sweep import corpus_context
from es_tour.datasets import BeirDataset
from es_tour.evaluation import MethodReport, MethodSpec, evaluate
from es_tour.metrics import CHANGED, HURT_AT, robustness
from es_tour.models import is_ensemble, labeler_encoder, parse_ensemble
from es_tour.models._corpus_cache import cached_corpus_embeddings
from es_tour.models._labelers import model_directory
from es_tour.training import train_policy
from es_tour.tuning import BASELINE, fused_spec, plain_spec

SINGLE_ROUND = ("rerank", BASELINE, "rerank:first_stage=hybrid-linear")  # one labelled pool
PLAIN = MethodSpec.parse("hybrid-linear")  # what robustness is counted against
PARTS = ("p2", "gain")  # what --only can re-measure alone
POLICY_PREFIX = "labelers-"  # + the labeler's name as a registry name: P2's policy
SECTION_START = "<!-- labelers section: python -m es_tour.bench.labelers -->"
SECTION_END = "<!-- end of labelers section -->"


def best(run: Mapping[str, Any], budget: int, names: Sequence[str]) -> tuple[str, str] | None:
    """(method, fused label) among `names` with the best fused train nDCG@10 at `budget`."""
    fitted = [(run["weights"][plain_spec(name, budget).label], name) for name in names
              if plain_spec(name, budget).label in run["weights"]]
    if not fitted:
        return None
    (w_bm25, w_dense, _), name = max(fitted, key=lambda each: each[0][2])
    return name, fused_spec(plain_spec(name, budget), w_bm25, w_dense).label


def first_engine(run: Mapping[str, Any]) -> dict[str, Any]:
    return dict(next(iter(run["engines"].values()))["methods"])


def p1a(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per budget: the labeler's best method against its rerank-hybrid and relevance
    feedback, plain and fused, on test."""
    methods, rows = first_engine(run), []
    for budget in BUDGETS:
        chosen_method = best(run, budget, METHODS)
        if chosen_method is None:
            continue
        row = {"budget": budget, "method": chosen_method[1],
               "ndcg@10": methods[chosen_method[1]]["ndcg@10"]}
        for peer in (BASELINE, FEEDBACK):
            peer_best = best(run, budget, [peer])
            if peer_best:
                row[peer] = {"plain": methods[plain_spec(peer, budget).label]["ndcg@10"],
                             "fused": methods[peer_best[1]]["ndcg@10"]}
        rows.append(row)
    return rows


def p1b(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per budget: the best multi-round method against the best single-round one, each
    chosen on train (fused), on test: refinement's own gain."""
    methods, rows = first_engine(run), []
    multi = [name for name in METHODS if name not in SINGLE_ROUND]
    for budget in BUDGETS:
        one, many = best(run, budget, SINGLE_ROUND), best(run, budget, multi)
        if one and many:
            rows.append({"budget": budget, "single": one[1], "multi": many[1],
                         "single_ndcg@10": methods[one[1]]["ndcg@10"],
                         "multi_ndcg@10": methods[many[1]]["ndcg@10"]})
    return rows


def changes(mine: Mapping[str, float], theirs: Mapping[str, float]) -> dict[str, Any]:
    """Query-by-query wins and losses (moves over `CHANGED`), the robustness index
    (wins − losses) / queries, and the share of queries hurt by `HURT_AT` or more."""
    versus = robustness(mine, theirs)
    deltas = np.array([mine[qid] - theirs[qid] for qid in theirs])
    return {"queries": versus.queries, "wins": versus.wins, "losses": versus.losses,
            "unchanged": versus.queries - versus.wins - versus.losses,
            "robustness_index": round(versus.index, 4), "hurt": versus.hurt,
            "mean_delta": round(float(deltas.mean()), 4)}


def doc_ms(labeler: str, dataset: BeirDataset) -> float | None:
    """ms to embed one new doc for `labeler` (each member's, summed), from the rates its
    members' corpus caches measured when they embedded this corpus."""
    texts = [doc.contents for doc in dataset.corpus()]
    members = [m.model for m in parse_ensemble(labeler)] if is_ensemble(labeler) else [labeler]
    total = 0.0
    for member in members:
        if not model_directory(member)[0].is_dir():
            return None
        cached = cached_corpus_embeddings(labeler_encoder(member), dataset.root /
                                          "corpus.jsonl", texts)
        if cached is None:
            return None
        total += 1000.0 / cached[1]
    return round(total, 1)


def policy_name(labeler: str) -> str:
    """The registry name of the policy this bench trains with `labeler`."""
    return POLICY_PREFIX + re.sub(r"[^a-z0-9]+", "-", labeler.lower()).strip("-")


def policy_facts(policy: str, labeler: str) -> dict[str, Any]:
    """What the manifest of `policy` says of its training; refuses a policy trained on
    another labeler or split than P2 measures with (its φ features would not be the
    ones it was fitted on)."""
    manifest = json.loads((policy_dir(policy) / "manifest.json").read_text())
    training = manifest["training"]
    if training.get("labeler") != labeler or training.get("split") != "train":
        raise SystemExit(f"policy {policy!r} was trained with labeler "
                         f"{training.get('labeler')!r} on {training.get('split')!r}; the "
                         f"learned agent's comparison measures labeler {labeler!r}: train "
                         f"one with `es-tour train-agent "
                         f"--labeler '{labeler}'` or leave --policy out")
    return {"name": policy, "labeler": training["labeler"], "queries": training["queries"],
            "examples": training["examples"], "positives": training["positives"],
            "improved_queries": training.get("improved_queries"),
            "threshold": round(float(manifest["threshold"]), 4),
            "seconds": round(float(training["seconds"]), 1), "created": manifest["created"]}


async def measure_p2(dataset: BeirDataset, url: str, labeler: str, policy: str | None,
                     policy_queries: int | None) -> dict[str, Any]:
    """P2 with `labeler`: the learned agent's policy trained with it on train (here, unless
    `policy` names one already trained with it), then HRE and the learned agent on test."""
    qrels = dataset.qrels("test")
    async with corpus_context(dataset, url, labeler=labeler) as context:
        if policy is None:
            policy = policy_name(labeler)
            await train_policy(context.engine, context.index, dataset, "train",
                               policy_queries, policy_dir(policy), encoder=context.encoder,
                               labeler=context.labeler)
        facts = policy_facts(policy, context.labeler.name)
        agents = [MethodSpec.parse(f"hre:budget={CHOICE_BUDGET}"),
                  MethodSpec.parse(f"learned-agent:budget={CHOICE_BUDGET}:policy={policy}")]
        hre, learned = await evaluate(context, dataset, agents, split="test",
                                      cold_labels=False)
    return {**p2(hre, learned, qrels), "policy": facts}


def bootstrap_ci(deltas: Sequence[float], draws: int = 10_000, seed: int = 0
                 ) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the mean of the per-query `deltas`."""
    values = np.asarray(deltas, dtype=float)
    rows = np.random.default_rng(seed).integers(0, len(values), (draws, len(values)))
    means = values[rows].mean(axis=1)
    return round(float(np.quantile(means, 0.025)), 4), round(float(np.quantile(means, 0.975)), 4)


async def measure_gain(dataset: BeirDataset, url: str,
                       runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per budget: the chosen labeler's best method against the default labeler's best
    (the first candidate's), both chosen on train, query by query on test."""
    qrels = dataset.qrels("test")
    base_candidate, choice = next(iter(runs)), chosen(runs)
    if base_candidate == choice:
        return []
    per_query: dict[str, dict[int, tuple[str, dict[str, float], float]]] = {}
    for candidate in (base_candidate, choice):
        run, per_query[candidate] = runs[candidate], {}
        specs = {budget: found[1] for budget in BUDGETS
                 if (found := best(run, budget, METHODS)) is not None}
        async with corpus_context(dataset, url, labeler=run["name"]) as context:
            reports = await evaluate(context, dataset,
                                     [MethodSpec.parse(label) for label in specs.values()],
                                     split="test", cold_labels=False)
        for budget, report in zip(specs, reports, strict=True):
            per_query[candidate][budget] = (report.spec.label, report.ndcg_by_query(qrels),
                                            report.summary()["ndcg@10"])
    new = new_to_train(dataset)
    rows = []
    for budget in BUDGETS:
        if budget not in per_query[base_candidate] or budget not in per_query[choice]:
            continue
        base_label, theirs, base_ndcg = per_query[base_candidate][budget]
        label, mine, ndcg = per_query[choice][budget]
        rows.append({"budget": budget, "base": runs[base_candidate]["name"],
                     "base_method": base_label, "base_ndcg@10": base_ndcg,
                     "method": label, "ndcg@10": ndcg, **changes(mine, theirs),
                     "ci95": bootstrap_ci([mine[q] - theirs[q] for q in theirs]),
                     "new_to_train": {
                         "queries": len(new), "ndcg@10": _mean(mine, new),
                         "base_ndcg@10": _mean(theirs, new),
                         "ci95": bootstrap_ci([mine[q] - theirs[q] for q in new])}})
    return rows


def _mean(per_query: Mapping[str, float], queries: Sequence[str]) -> float:
    return round(float(np.mean([per_query[q] for q in queries])), 4)


async def measure(dataset: BeirDataset, url: str, runs: Mapping[str, Mapping[str, Any]],
                  policy: str | None = None, policy_queries: int | None = None
                  ) -> dict[str, Any]:
    """The test searches the frontier lacks, on the first engine."""
    qrels = dataset.qrels("test")
    choice = runs[chosen(runs)]
    out: dict[str, Any] = {"labelers": {}}
    async with corpus_context(dataset, url, labeler=choice["name"]) as context:
        plain, = await evaluate(context, dataset, [PLAIN], split="test", cold_labels=True)
        out["plain"] = plain.summary()
        out["plain_per_query"] = plain.ndcg_by_query(qrels)
    out["p2"] = await measure_p2(dataset, url, choice["name"], policy, policy_queries)
    for candidate, run in runs.items():
        method = best(run, CHOICE_BUDGET, METHODS)
        assert method is not None
        async with corpus_context(dataset, url, labeler=run["name"]) as context:
            plain_timed, timed = await evaluate(
                context, dataset, [PLAIN, MethodSpec.parse(method[1])], split="test",
                cold_labels=True)
        out["labelers"][candidate] = {
            "name": run["name"], "method": method[1], "doc_ms": doc_ms(run["name"], dataset),
            "warm_p50_ms": timed.summary()["latency_ms_p50"],
            "plain_p50_ms": plain_timed.summary()["latency_ms_p50"],
            "ndcg@10": timed.summary()["ndcg@10"],
            "robustness": changes(timed.ndcg_by_query(qrels), out["plain_per_query"]),
            "p1a": p1a(run), "p1b": p1b(run)}
    out["gain"] = await measure_gain(dataset, url, runs)
    return out


def p2(hre: MethodReport, learned: MethodReport, qrels: Mapping[str, Mapping[str, int]]
       ) -> dict[str, Any]:
    """The learned agent against HRE: both figures, and the queries it changed."""
    theirs, mine = hre.ndcg_by_query(qrels), learned.ndcg_by_query(qrels)
    moved = sorted(((mine[q] - theirs[q], q) for q in theirs if abs(mine[q] - theirs[q]) > 0),
                   reverse=True)
    return {"hre": hre.summary()["ndcg@10"], "learned": learned.summary()["ndcg@10"],
            "hre_label": hre.spec.label, "learned_label": learned.spec.label,
            **changes(mine, theirs),
            "moved": [{"query": q, "delta": round(d, 4)} for d, q in moved]}


def markdown(report: Mapping[str, Any]) -> str:
    lines = ["## The labelers (their gain, refinement's own gain, the learned agent, cost, "
             "robustness)", "",
             f"Written by `{report['command']}` on {report['date']} ({report['machine']}), "
             "from the budget frontier's runs ([benchmarks/frontier.md](benchmarks/frontier.md)) "
             f"and test searches made then; SciFact test, {report['plain']['queries']} queries, "
             "everything chosen on train. Per budget, a labeler's *best* is its method with "
             "the best fused train nDCG@10; its peers are measured with the same labeler at "
             "the same budget.", ""]
    if report.get("frontier"):
        lines += ["**The frontier** (per budget, the labeler and method with the best fused "
                  "train nDCG@10, from frontier.json):", "", *report["frontier"], ""]
    for candidate, facts in report["labelers"].items():
        lines += [f"### `{facts['name']}`{' (chosen)' if candidate == report['chosen'] else ''}",
                  "", "| budget | es-tour's best | nDCG@10 | rerank-hybrid plain / fused "
                  "| relevance feedback plain / fused |", "|---|---|---|---|---|"]
        for row in facts["p1a"]:
            cells = [f"{row[peer]['plain']:.4f} / {row[peer]['fused']:.4f}"
                     if peer in row else "not measured" for peer in (BASELINE, FEEDBACK)]
            lines.append(f"| {row['budget']} | `{row['method']}` | {row['ndcg@10']:.4f} | "
                         + " | ".join(cells) + " |")
        lines += ["", "**Refinement's own gain** (the best multi-round method against "
                  "the best single-round one, a fused rerank of its pool):", ""]
        lines += [f"- {row['budget']} pairs: `{row['multi']}` {row['multi_ndcg@10']:.4f} "
                  f"against `{row['single']}` {row['single_ndcg@10']:.4f} "
                  f"({row['multi_ndcg@10'] - row['single_ndcg@10']:+.4f})"
                  for row in facts["p1b"]]
        robust = facts["robustness"]
        doc = facts["doc_ms"]
        lines += ["", f"**Cost:** {f'{doc:.0f} ms' if doc else 'not measured'} to embed a new "
                  "doc (each member's rate when it embedded this corpus, summed); warming "
                  f"SciFact's 5,183 docs: {f'{5183 * doc / 60000:.0f} min' if doc else '–'}; "
                  f"a warm `{facts['method']}` search p50 {facts['warm_p50_ms']:.0f} ms against "
                  f"plain hybrid-linear's {facts['plain_p50_ms']:.0f} ms "
                  f"({facts['warm_p50_ms'] / facts['plain_p50_ms']:.2f}×, every test query "
                  "one at a time, each method's labeler caches empty and doc vectors held as "
                  "after `es-tour warm`: its query embeddings count, not its docs').", "",
                  f"**Robustness** of `{facts['method']}` against plain hybrid-linear, query by "
                  f"query: {robust['wins']} wins, {robust['losses']} losses, "
                  f"{robust['unchanged']} unchanged (moves over {CHANGED}); robustness index "
                  f"{robust['robustness_index']:+.2f}; {robust['hurt']} queries "
                  f"({robust['hurt'] / robust['queries']:.1%}) lose {HURT_AT} or more.", ""]
    if report.get("gain"):
        gain = report["gain"]
        chosen_name = report["labelers"][report["chosen"]]["name"]
        lines += [f"### `{chosen_name}` against `{gain[0]['base']}`, query by query", ""]
        lines += _remeasured(report, "gain")
        lines += [f"Each budget's best method (chosen on train) with either labeler, on the "
                  f"same {gain[0]['queries']} test queries; wins and losses are moves over "
                  f"{CHANGED}; the interval is a bootstrap 95% interval of the mean gain.", "",
                  "| budget | with the chosen labeler | with the default | gain | 95% interval "
                  "| wins / losses / unchanged |", "|---|---|---|---|---|---|"]
        lines += [f"| {row['budget']} | `{row['method']}` {row['ndcg@10']:.4f} | "
                  f"`{row['base_method']}` {row['base_ndcg@10']:.4f} | "
                  f"{row['ndcg@10'] - row['base_ndcg@10']:+.4f} | "
                  f"{row['ci95'][0]:+.4f} to {row['ci95'][1]:+.4f} | "
                  f"{row['wins']} / {row['losses']} / {row['unchanged']} |" for row in gain]
        lines.append("")
        apart = [row for row in gain if "new_to_train" in row]
        if apart:
            lines += [f"On the {apart[0]['new_to_train']['queries']} test queries whose "
                      "relevant docs train never judged (where a labeler tuned on train "
                      "cannot have learned which docs answer):", "",
                      "| budget | with the chosen labeler | with the default | gain | 95% "
                      "interval |", "|---|---|---|---|---|"]
            lines += [f"| {row['budget']} | {n['ndcg@10']:.4f} | {n['base_ndcg@10']:.4f} | "
                      f"{n['ndcg@10'] - n['base_ndcg@10']:+.4f} | {n['ci95'][0]:+.4f} to "
                      f"{n['ci95'][1]:+.4f} |" for row in apart
                      for n in [row["new_to_train"]]]
            lines.append("")
    agent = report["p2"]
    lines += ["### The learned agent against HRE", ""]
    lines += _remeasured(report, "p2")
    trained = agent.get("policy")
    if trained:
        lines += [f"The policy `{trained['name']}` was trained with the labeler it runs with "
                  f"(`{trained['labeler']}`, over its cached corpus vectors) on "
                  f"{trained['queries']} SciFact train queries in {trained['seconds']:.0f} s: "
                  f"{trained['examples']:,} oracle trials, {trained['positives']:,} of which "
                  f"raised nDCG@10; act threshold {trained['threshold']:.3f}.", ""]
    lines += [f"`{agent['learned_label']}` {agent['learned']:.4f} against `{agent['hre_label']}` "
              f"{agent['hre']:.4f} ({agent['learned'] - agent['hre']:+.4f}), labeler "
              f"`{report['labelers'][report['chosen']]['name']}`. It changed "
              f"{len(agent['moved'])} of {agent['queries']} queries' nDCG@10: {agent['wins']} "
              f"up and {agent['losses']} down by more than {CHANGED}"
              + ("; the largest moves: " + ", ".join(
                  f"{m['query']} {m['delta']:+.3f}" for m in largest(agent["moved"]))
                 if agent["moved"] else "") + ".", ""]
    return "\n".join(lines)


def largest(moved: Sequence[Mapping[str, Any]], each_way: int = 3
            ) -> list[Mapping[str, Any]]:
    """The `each_way` largest moves up and down (sorted from up to down), each once."""
    if len(moved) <= 2 * each_way:
        return list(moved)
    return [*moved[:each_way], *moved[-each_way:]]


def _remeasured(report: Mapping[str, Any], part: str) -> list[str]:
    """The line saying a part was re-measured alone (`--only`), and by what."""
    again = report.get("remeasured", {}).get(part)
    if not again:
        return []
    return [f"Re-measured alone by `{again['command']}` on {again['date']} "
            f"({again['machine']}); the rest of the page is the run's named at the top.", ""]


def write(report: dict[str, Any], out: Path) -> None:
    (out / "benchmarks").mkdir(parents=True, exist_ok=True)
    (out / "benchmarks" / "labelers.json").write_text(json.dumps(report, indent=1))
    section = markdown(report)
    (out / "benchmarks" / "labelers.md").write_text(
        section.replace("## The labelers", "# The labelers", 1)
        .replace("](benchmarks/", "](") + "\n")
    results = out / "RESULTS.md"
    text = results.read_text()
    if SECTION_START not in text:
        text = text.replace("\n## The budget frontier",
                            f"\n{SECTION_START}\n{SECTION_END}\n\n## The budget frontier", 1)
    start, end = text.index(SECTION_START) + len(SECTION_START), text.index(SECTION_END)
    results.write_text(text[:start] + "\n" + section + "\n" + text[end:])


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, ["opensearch"])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--policy", default=None,
                        help="The learned agent runs this policy, which must have been "
                             "trained on train with the chosen labeler (default: train "
                             "one here, stored as labelers-<labeler>)")
    parser.add_argument("--policy-queries", type=int, default=None,
                        help="train the policy on a fixed-seed sample of N train queries "
                             "(default: all of them)")
    parser.add_argument("--rerender", action="store_true",
                        help="measure nothing: rewrite labelers.md and RESULTS.md's section "
                             "from the labelers.json and frontier.json under --out")
    parser.add_argument("--only", default=None,
                        help=f"comma list of {', '.join(PARTS)}: re-measure those parts "
                             "alone; the rest is kept from the labelers.json under --out")
    args = parser.parse_args(argv)
    only = [part.strip() for part in (args.only or "").split(",") if part.strip()]
    if args.only is not None and (not only or set(only) - set(PARTS)):
        parser.error(f"--only takes some of {', '.join(PARTS)}")
    runs = labeler_runs(json.loads((args.out / "benchmarks" / "frontier.json").read_text()))
    dataset = BeirDataset(args.dataset)
    command = parsed_command("python -m es_tour.bench.labelers", args, parser)
    if args.rerender:
        report = json.loads((args.out / "benchmarks" / "labelers.json").read_text())
    elif only:
        report = json.loads((args.out / "benchmarks" / "labelers.json").read_text())
        if report["chosen"] != chosen(runs):
            raise SystemExit(f"labelers.json chose {report['chosen']!r} but frontier.json "
                             f"chooses {chosen(runs)!r}: run the whole bench")
        if "p2" in only:
            report["p2"] = asyncio.run(measure_p2(dataset, args.opensearch,
                                                  runs[report["chosen"]]["name"], args.policy,
                                                  args.policy_queries))
        if "gain" in only:
            report["gain"] = asyncio.run(measure_gain(dataset, args.opensearch, runs))
        report.setdefault("remeasured", {}).update(
            {part: {"command": command, "date": now(), "machine": machine()}
             for part in only})
    else:
        report = asyncio.run(measure(dataset, args.opensearch, runs, args.policy,
                                     args.policy_queries))
        report |= {"command": command, "date": now(), "machine": machine(),
                   "chosen": chosen(runs)}
        report["plain"]["queries"] = len(report.pop("plain_per_query"))
    report["frontier"] = frontier_per_budget(runs, new_to_train(dataset))
    write(report, args.out)
    print(f"wrote {args.out / 'benchmarks' / 'labelers.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
