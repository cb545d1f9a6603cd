"""A smaller BEIR collection cut from a bigger one, for timing what a user's first runs
cost: the relevant docs of the first N test queries, then docs drawn with a fixed seed up
to the size asked, those queries and their test judgements. Write it outside the repo:

    python -m es_tour.bench.subset --dataset ../shared/datasets/scifact \\
        --docs 1400 --queries 225 --out ../scifact-1400
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path

from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError

SEED = 0


def write_subset(dataset: BeirDataset, docs: int, queries: int, out: Path) -> tuple[int, int]:
    """Write the subset to `out`; returns (docs, queries) written."""
    qrels = dataset.qrels("test")
    kept = list(qrels)[:queries]
    relevant = {doc for qid in kept for doc in qrels[qid]}
    lines = (dataset.root / "corpus.jsonl").read_text().splitlines()
    ids = [str(json.loads(line)["_id"]) for line in lines]
    if len(relevant) > docs:
        raise ConfigError(f"the first {queries} test queries judge {len(relevant)} docs "
                          f"relevant: more than --docs {docs}")
    others = [i for i, doc in enumerate(ids) if doc not in relevant]
    drawn = set(random.Random(SEED).sample(others, min(len(others), docs - len(relevant))))
    chosen = [line for i, line in enumerate(lines) if ids[i] in relevant or i in drawn]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text("\n".join(chosen) + "\n")
    texts = dataset.queries("test")
    (out / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": texts[qid]}) + "\n" for qid in kept))
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{qid}\t{doc}\t{grade}\n" for qid in kept for doc, grade in qrels[qid].items()))
    return len(chosen), len(kept)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=1400)
    parser.add_argument("--queries", type=int, default=225)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    docs, queries = write_subset(BeirDataset(args.dataset), args.docs, args.queries, args.out)
    print(f"wrote {docs} docs and {queries} test queries to {args.out}")


if __name__ == "__main__":
    main()
