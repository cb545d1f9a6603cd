"""`es-tour train-agent`: clone the oracle agent into a learned-agent policy."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from es_tour.cli._app import app
from es_tour.cli._checks import CaCerts, ClientCert, ClientKey, VerifyCerts, engine_target
from es_tour.cli._errors import clean_errors, err_console
from es_tour.cli._shared import (
    Dataset,
    Engine,
    Index,
    Labeler_,
    Url,
    _context,
    _corpus_labeler,
    _ingest,
    console,
)
from es_tour.datasets import BeirDataset


@app.command("train-agent")
@clean_errors
def train_agent_command(
    dataset: Dataset,
    split: Annotated[str, typer.Option(help="judged split to train on (never test)")] = "train",
    name: Annotated[str, typer.Option(
        help="the policy's registry name, which `learned-agent:policy=NAME` (or ext.tour "
             "policy) selects")] = "default",
    engine: Engine = "opensearch",
    url: Url = None,
    index: Index = None,
    labeler: Labeler_ = "default",
    max_queries: Annotated[int | None, typer.Option(
        help="a fixed-seed sample of N queries (default: all of the split)", min=1)] = None,
    corpus_vectors: Annotated[bool, typer.Option(
        help="a dual-encoder labeler encodes the corpus once (cached) and labels by dot "
             "products: the oracle's trials label thousands of pairs")] = True,
    tour_action: Annotated[bool, typer.Option(
        help="TOUR's step is an action too: the oracle tries it, and the policy learns "
             "when to take it")] = False,
    on_policy: Annotated[bool, typer.Option(
        help="the oracle tries the learned agent's own candidates (from A_t's best docs by "
             "the labeler), not its judged pools: trials from the pool the policy acts on")
    ] = False,
    ca_certs: CaCerts = None,
    client_cert: ClientCert = None,
    client_key: ClientKey = None,
    verify_certs: VerifyCerts = True,
) -> None:
    """Run the oracle agent on a split's queries and fit the learned agent's policy on its
    trials (gradient-boosted trees); writes it to the policy registry under NAME."""
    from es_tour.agents import TourStep, check_policy_name, policy_dir
    from es_tour.training import train_policy
    from es_tour.training._reranker import check_training_split

    check_training_split(split)
    check_policy_name(name)
    data = BeirDataset(dataset)
    data.qrels(split)  # an unknown split fails now, not after the ingest
    target = engine_target(engine, url, ca_certs, client_cert, client_key, verify_certs)

    async def run() -> None:
        context = _context(target, index or data.name, labeler)
        if corpus_vectors:
            context.labeler = _corpus_labeler(context.labeler, data)
        async with context.engine:
            await _ingest(context, data, replace=False)
            report = await train_policy(context.engine, context.index, data, split,
                                        max_queries, policy_dir(name), encoder=context.encoder,
                                        labeler=context.labeler,
                                        tour_step=TourStep() if tour_action else None,
                                        on_policy=on_policy)
        training = report.info["training"]
        console.print(
            f"wrote policy '{name}' ({report.manifest}): {report.queries} {split} queries, "
            f"{report.examples} oracle trials ({report.positives} improved nDCG@10), "
            f"{report.seconds:.0f}s\n  oracle operators: {report.oracle_operators}\n"
            f"  nDCG@10 of A_0 {report.ndcg_hre:.4f}, after the oracle {report.ndcg_oracle:.4f}"
            f"\n  act threshold {training['threshold']:.3f}; held-out precision at the top "
            f"trials {training['held_out_precision_at']}")
        if training["improved_queries"] < 2:
            err_console.print(f"warning: a Δq improved nDCG@10 on {training['improved_queries']} "
                              "queries only; the policy never acts (train on more queries)")

    asyncio.run(run())
