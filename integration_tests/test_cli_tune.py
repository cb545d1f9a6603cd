"""`es-tour tune --apply` on both engines: the settings it writes (a labelling method, a
labeler-free one or TOUR off, as its decision says) make the sidecar reproduce the figure
tune reported for its recommendation on the held-out queries.

The collection is SciFact's corpus (the shared `scifact` index) judged by its first 40
test queries only, so tune divides that one split with fixed seeds: the fit, the guard's
validation queries, and held-out queries that only report. The labeler is
the retriever's model (minilm-l6): the test checks the chain from fit to served settings,
and the budget frontier (docs/benchmarks/frontier.md) measures the default labeler's.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from es_tour.datasets import BeirDataset
from es_tour.engines import text_query
from es_tour.metrics import ranked, score_run
from es_tour.pipeline import DEFAULT_TEXT_FIELDS
from es_tour.server import BackgroundServer, Models, ServerConfig
from es_tour.tuning import CANDIDATES
from integration_tests.test_cli_engine import es_tour

JUDGED = 40  # test queries judged in the collection
LABELER = "minilm-l6"
SAME = 0.003  # the bar: the sidecar reproduces tune's figure within this


def _judged_collection(scifact: BeirDataset, root: Path) -> Path:
    """SciFact's corpus and queries (linked: the data never enters the repo) with one
    judged split, the first `JUDGED` test queries."""
    (root / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (root / name).symlink_to(scifact.root / name)
    qrels = scifact.qrels("test")
    rows = [f"{qid}\t{doc}\t{grade}\n" for qid in list(qrels)[:JUDGED]
            for doc, grade in qrels[qid].items()]
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows))
    return root


def test_tune_apply_writes_settings_the_sidecar_reproduces(tuned_upstream, scifact, scifact_index,
                                                           tmp_path):
    engine, url = tuned_upstream
    data = _judged_collection(scifact, tmp_path / "judged")
    output = tmp_path / "tune.json"
    result = es_tour("tune", "--dataset", str(data), "--engine", engine, "--url", url,
                     "--index", scifact_index, "--labeler", LABELER, "--budgets", "10",
                     "--apply", "--output", str(output))
    assert result.returncode == 0, result.stderr
    tuned = json.loads(output.read_text())
    parts = [set(tuned[f"{part}_qids"]) for part in ("fit", "validation", "held_out")]
    assert [len(ids) for ids in parts] == [tuned[f"{part}_queries"]
                                           for part in ("fit", "validation", "held_out")]
    assert sum(map(len, parts)) == len(set.union(*parts)) == JUDGED  # disjoint
    chosen = tuned["budgets"]["10"]
    # the choice is the candidate with the best fitted nDCG@10, among all the frontier has
    assert len(chosen["candidates"]) == len(CANDIDATES)
    best = max(chosen["candidates"], key=lambda each: each["fit_ndcg@10"])
    assert best["chosen"] and chosen["choice"].startswith(best["label"])
    # on the validation queries, the choice, rerank-hybrid and the labeler-free candidates
    # (plain BM25, hybrid-linear with its fitted weight); the held-out queries only report
    guard = chosen["validation"]
    held = chosen["held_out"]
    assert set(held) == set(guard) == {chosen["choice"], chosen["baseline"],
                                       *chosen["labeler_free"]}
    assert chosen["labeler_free"] == ["bm25", "hybrid-linear:lexical_weight="
                                      f"{tuned['labeler_free_fit']['lexical_weight']}"]
    # it recommends the better of the choice and rerank-hybrid where that beats the best
    # labeler-free candidate by --min-gain without losing more queries than it wins, else
    # that candidate (plain BM25: TOUR off)
    decision = chosen["decision"]
    standing = {each["label"]: each for each in decision["standings"]}
    free = max(chosen["labeler_free"], key=lambda label: guard[label]["ndcg@10"])
    assert decision["against"] == free
    paying = [label for label in (chosen["choice"], chosen["baseline"])
              if standing[label]["gain"] >= tuned["min_gain"]
              and standing[label]["wins"] >= standing[label]["losses"]]
    best = max(paying, key=lambda label: guard[label]["ndcg@10"], default=free)
    assert chosen["recommended"] == decision["kept"] == best
    assert chosen["off"] == (best == "bm25")
    # each candidate's robustness against that candidate, on validation and held out
    for label, each in standing.items():
        versus, reported = each["robustness"], held[label]["robustness"]
        assert (versus["wins"], versus["losses"]) == (each["wins"], each["losses"])
        assert versus["index"] == round((each["wins"] - each["losses"]) / each["queries"], 4)
        assert reported["queries"] == tuned["held_out_queries"]
        assert 0 <= reported["hurt"] <= reported["losses"]
    assert held[free]["robustness"]["wins"] == held[free]["robustness"]["losses"] == 0
    # the settings went through the engine (the plugin validated them) and are on the index
    flat = httpx.get(f"{url}/{scifact_index}/_settings/index.tour.*",
                     params={"flat_settings": "true"}).json()[scifact_index]["settings"]
    assert tuned["applied"]["settings"] == chosen["settings"]
    assert flat == {key: str(value).lower() if isinstance(value, bool) else str(value)
                    for key, value in chosen["settings"].items()}
    assert flat.get("index.tour.labeler") == (LABELER if paying else None)
    # a sidecar with those settings and nothing else answers the held-out queries with
    # tune's figure
    judged = BeirDataset(data)
    qrels = judged.qrels("test")
    held_out = {qid: text for qid, text in judged.queries("test").items()
                if qid in set(tuned["held_out_qids"])}
    assert len(held_out) == tuned["held_out_queries"]
    run = {}
    with BackgroundServer(ServerConfig(upstream=url), Models("retriever")) as sidecar:
        for qid, text in held_out.items():
            answer = httpx.post(f"{sidecar.url}/{scifact_index}/_search", timeout=120,
                                json={"query": text_query(text, DEFAULT_TEXT_FIELDS), "size": 100})
            assert answer.status_code == 200, answer.text
            # TOUR off: the sidecar passes the application's search through
            tour = answer.json().get("ext", {}).get("tour")
            assert (tour or {}).get("method") == chosen["settings"].get("index.tour.method")
            hits = answer.json()["hits"]["hits"]
            run[qid] = ranked([hit["_id"] for hit in hits])
    served = score_run({qid: qrels[qid] for qid in held_out}, run)["ndcg@10"]
    reported = held[chosen["recommended"]]["ndcg@10"]
    assert served == pytest.approx(reported, abs=SAME)
