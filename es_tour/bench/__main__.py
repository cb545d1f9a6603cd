"""`make bench`: every benchmark on the machine at hand, then RESULTS.md and its plots.

    python -m es_tour.bench --dataset ../shared/datasets/scifact \\
        --opensearch http://127.0.0.1:9200 --elasticsearch http://127.0.0.1:9210 --out docs

Both engines must be running (`make bench` starts them). The labeler reads its corpus
vectors from the model cache (computed once, ~9 min for bge-small int8 on two cores), and
the learned agent's policy is trained afresh on train queries each run. `--smoke` runs
the same pipeline on 5 test queries with tiny sweeps, to check it works (the models
bench aside: `python -m es_tour.bench.models --smoke`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rich.console import Console

from es_tour.agents import (
    AgentOptions,
    CorpusLabeler,
    LearnedOptions,
    check_policy_name,
    policy_dir,
)
from es_tour.bench import proxy, results
from es_tour.bench._commands import bench_parser, portable_command
from es_tour.bench._machine import machine, now
from es_tour.bench.retrieval import (
    AGENT_SWEEPS,
    ALL_METHODS,
    CROSS_ENCODER_METHODS,
    TOUR_SWEEPS,
    Sweep,
    ingest_speed,
    measure_labeler_cost,
    run_methods,
    run_sweeps,
)
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.ingest import ingest
from es_tour.models import (
    CrossEncoder,
    CrossEncoderLabeler,
    labeler_encoder,
    query_encoder,
)
from es_tour.paths import models_dir
from es_tour.pipeline import SearchContext
from es_tour.tour import TourConfig
from es_tour.training import sample_queries, train_policy
from onnx_models import spec

console = Console(stderr=True)


@dataclass(frozen=True)
class Plan:
    """How much of each benchmark to run."""

    test_queries: int | None  # None: the whole test split
    sweep_queries: int
    policy_queries: int
    cross_queries: int
    ingest_docs: int
    proxy_requests: int
    sweeps: tuple[Sweep, ...]
    smoke: bool  # also: one proxy round, and no models bench (tests/models runs its own)


FULL = Plan(None, 100, 200, 50, 1024, 300, (*TOUR_SWEEPS, *AGENT_SWEEPS), False)
SMOKE = Plan(5, 10, 20, 5, 16, 20, (Sweep("tour-hard:k=10:max_rounds=3", "lr", (0.1, 0.2)),
                                      Sweep("learned-agent", "m", (3, 5))), True)


def code_defaults() -> dict[str, Any]:
    """`method.parameter` -> the default the code ships, for the sweep tables."""
    defaults = {}
    for method, options in (("tour-hard", TourConfig), ("tour-soft", TourConfig),
                            ("rm3-agent", AgentOptions), ("learned-agent", LearnedOptions)):
        for f in fields(options):
            defaults[f"{method}.{f.name}"] = f.default
    return defaults


async def run(
    dataset: BeirDataset, urls: dict[str, str], index: str, labeler_name: str,
    cross_encoder: Path | None, plan: Plan, policy: str = "bench",
    labeler_precision: str | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    retriever = query_encoder("retriever")
    recipe = spec(labeler_name)
    encoder = labeler_encoder(recipe.name, precision=labeler_precision)
    labeler = CorpusLabeler(encoder, dataset, recipe.name)
    sample = [doc.contents for doc in list(dataset.corpus())[:32]]
    cost = measure_labeler_cost(encoder, sample, f"{recipe.name} ({encoder.precision})")
    test_ids = list(dataset.queries("test"))[: plan.test_queries]
    out: dict[str, Any] = {
        "date": now(), "machine": machine(), "dataset": dataset.name,
        "retriever": spec("retriever").name, "labeler_cost": cost.__dict__,
        "test_queries": len(test_ids), "sweep_queries": plan.sweep_queries,
        "defaults": code_defaults(), "engines": {},
    }
    for position, (engine_name, url) in enumerate(urls.items()):
        context = SearchContext(connect(engine_name, url), index, retriever, labeler)
        async with context.engine:
            await ingest(context.engine, dataset, index, retriever, if_missing=True)
            version = await context.engine.version()
            if position == 0:
                out["ingest"] = await ingest_speed(context, dataset, plan.ingest_docs)
                console.print(f"ingest: {out['ingest']}")
                trained = await train_policy(context.engine, index, dataset, "train",
                                             plan.policy_queries, policy_dir(policy),
                                             encoder=retriever,
                                             labeler=labeler)
                # train_policy's own fixed-seed sample; the sweeps use other train queries
                policy_ids = set(sample_queries(dataset, "train", plan.policy_queries))
                sweep_ids = [q for q in dataset.queries("train") if q not in policy_ids][
                    : plan.sweep_queries]
                sweeps = await run_sweeps(context, dataset, _with_policy(plan.sweeps, policy),
                                          sweep_ids)
                out["sweeps"] = [{**row, "base": _strip_policy(row["base"])} for row in sweeps]
                out["operators"] = {"oracle (train, policy training)": trained.oracle_operators}
                console.print(f"policy and {len(sweeps)} sweeps done at {_minutes(started)}")
            methods = await run_methods(
                context, dataset, _methods_with_policy(ALL_METHODS, policy), "test",
                plan.test_queries, cost)
            methods = {_strip_policy(label): m for label, m in methods.items()}
            out["engines"][engine_name] = {"version": version, "methods": methods}
            console.print(f"{engine_name} {version}: {len(methods)} methods done at "
                          f"{_minutes(started)}")
            if position == 0:
                for who in ("oracle-agent", "learned-agent"):
                    out["operators"][f"{who} (test)"] = methods[who].get("operators", {})
                if cross_encoder is not None:
                    out["cross_encoder"] = await _cross_encoder_run(
                        context, dataset, cross_encoder, plan.cross_queries, policy)
    out["proxy_markdown"] = proxy.markdown(
        await asyncio.to_thread(proxy.measure, next(iter(urls.values())), index,
                                plan.proxy_requests, 1 if plan.smoke else 5),
        "python -m es_tour.bench")
    out["models_markdown"] = None if plan.smoke else _models_markdown()
    out["seconds"] = time.perf_counter() - started
    return out


async def _cross_encoder_run(context: SearchContext, dataset: BeirDataset, path: Path,
                             queries: int, policy: str) -> dict[str, Any]:
    encoder = CrossEncoder(path, "int8")
    name = encoder.manifest.name or path.name
    crossed = SearchContext(context.engine, context.index, context.encoder,
                            CrossEncoderLabeler(encoder, name))
    methods = await run_methods(crossed, dataset,
                                _methods_with_policy(CROSS_ENCODER_METHODS, policy),
                                "test", queries)
    return {"name": name, "precision": "int8", "queries": queries,
            "methods": {_strip_policy(label): m for label, m in methods.items()}}


def _minutes(started: float) -> str:
    return f"{(time.perf_counter() - started) / 60:.1f} min"


def _methods_with_policy(methods: tuple[str, ...], policy: str) -> list[str]:
    return [f"{m}:policy={policy}" if m.startswith("learned-agent") else m for m in methods]


def _with_policy(sweeps: tuple[Sweep, ...], policy: str) -> list[Sweep]:
    return [Sweep(f"{s.base}:policy={policy}", s.parameter, s.values)
            if s.base.startswith("learned-agent") else s for s in sweeps]


def _strip_policy(label: str) -> str:
    return ":".join(part for part in label.split(":") if not part.startswith("policy="))


def _models_markdown() -> str | None:
    try:
        from es_tour.bench import models
    except ImportError:  # torch and transformers come with the `export` extra
        return None
    return models.render_markdown(models.run())


def _trained_reranker() -> Path | None:
    path = models_dir() / "scifact-reranker"
    return path if (path / "manifest.json").is_file() else None


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--index", default=None, help="default: the dataset's name")
    parser.add_argument("--labeler", default="default")
    parser.add_argument("--labeler-precision", choices=("fp32", "int8"), default=None,
                        help="the precision the labeler embeds the corpus and queries at "
                             "(default: the registry's labeler precision); the retriever's "
                             "int8 corpus vectors are the ones ingest cached")
    parser.add_argument("--cross-encoder", type=Path, default=_trained_reranker(),
                        help="a cross model directory (default: `make reranker`'s output, "
                             "when built)")
    parser.add_argument("--no-cross-encoder", dest="cross_encoder", action="store_const",
                        const=None, help="no fine-tuned reranker's section, built or not")
    parser.add_argument("--policy", default="bench", type=check_policy_name,
                        help="registry name the learned agent's policy is trained into "
                             "(learned-agent takes names, never paths)")
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    dataset = BeirDataset(args.dataset)
    urls = {"opensearch": args.opensearch, "elasticsearch": args.elasticsearch}
    collected = asyncio.run(run(dataset, urls, args.index or dataset.name, args.labeler,
                                args.cross_encoder, SMOKE if args.smoke else FULL,
                                args.policy, args.labeler_precision))
    given = sys.argv[1:] if argv is None else argv
    collected["command"] = portable_command("python -m es_tour.bench", given)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(collected, indent=1, default=str))
    print(f"wrote {results.write(collected, args.out)}")


if __name__ == "__main__":
    main()
