"""`es-tour tune --apply` leaves TOUR off where refinement cannot pay, on both engines.

The collection is built here: each query shares one made-up word with its one relevant doc
and nothing rarer with any other, so the application's own BM25 search already ranks the
relevant doc first for every query (nDCG@10 1.0) and no labelling method can gain on it.
tune ingests it into a fresh index, decides on its validation queries and writes
`index.tour.enabled: false`, clearing the index.tour.* settings left from before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from es_tour.cluster import NodeStatus
from integration_tests.conftest import ENGINES
from integration_tests.test_cli_engine import es_tour

INDEX = "tune-off"
QUERIES = 20  # tune holds out 6 to report on, validates on 4 and fits on 10
SYLLABLES = ("ka", "lo", "mir", "zen", "tu", "vex", "dra", "pol")
TOPICS = ("protein regulates cell growth in tissue samples",
          "compound lowers blood pressure in adults",
          "gene variant raises the risk of infection")
LABELER = "minilm-l6"  # the retriever's model, as test_cli_tune's: the decision is under test


def made_up_word(n: int) -> str:
    """A word no dictionary has, different for each `n`: three syllables."""
    return "".join(SYLLABLES[(n // 8 ** i) % 8] for i in range(3)) + "ine"


def exact_term_collection(root: Path) -> Path:
    """`QUERIES` queries, each with one relevant doc that alone holds its made-up word, and
    as many docs on the same topics without one; one judged split (test)."""
    (root / "qrels").mkdir(parents=True)
    docs, queries, qrels = [], [], []
    for n in range(QUERIES):
        topic = TOPICS[n % len(TOPICS)]
        word = made_up_word(n + 9)
        docs.append({"_id": f"rel-{n}", "title": "", "text": f"The {word} {topic}."})
        docs.append({"_id": f"other-{n}", "title": "", "text": f"A study of how a {topic}."})
        queries.append({"_id": f"q{n}", "text": f"does {word} {topic.split()[1]}"})
        qrels.append(f"q{n}\trel-{n}\t1\n")
    (root / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(query) + "\n" for query in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return root


@pytest.fixture(params=ENGINES)
def fresh_node(request: pytest.FixtureRequest, start_node: Callable[[str], NodeStatus]
               ) -> Iterator[tuple[str, str]]:
    """(engine, url) with no `INDEX`, which is deleted afterwards."""
    url = start_node(request.param).url
    httpx.delete(f"{url}/{INDEX}")
    yield request.param, url
    httpx.delete(f"{url}/{INDEX}")


def test_tune_apply_leaves_tour_off_where_plain_bm25_is_already_perfect(fresh_node, tmp_path):
    engine, url = fresh_node
    data = exact_term_collection(tmp_path / "exact")
    common = ("--dataset", str(data), "--engine", engine, "--url", url, "--index", INDEX,
              "--labeler", LABELER, "--budgets", "10", "--candidates", "rerank-hybrid")
    output = tmp_path / "tune.json"
    # a first run ingests the index; a method left on it must be cleared by the second
    first = es_tour("tune", *common)
    assert first.returncode == 0, first.stderr
    left = httpx.put(f"{url}/{INDEX}/_settings", json={
        "index.tour.enabled": True, "index.tour.method": "hybrid-tour",
        "index.tour.pool": "hybrid-linear", "index.tour.budget": 20})
    assert left.status_code == 200, left.text
    result = es_tour("tune", *common, "--apply", "--output", str(output))
    assert result.returncode == 0, result.stderr
    tuned = json.loads(output.read_text())
    chosen = tuned["budgets"]["10"]
    decision = chosen["decision"]
    by_label = {each["label"]: each for each in decision["standings"]}
    # plain BM25 ranks every validation query's relevant doc first: nothing gains on it
    assert by_label["bm25"]["ndcg@10"] == 1.0
    assert set(by_label) == {chosen["choice"], chosen["baseline"], *chosen["labeler_free"]}
    assert all(each["gain"] <= 0 and each["wins"] == 0
               for each in decision["standings"] if each["refining"])
    assert (decision["kept"], decision["off"], chosen["recommended"]) == ("bm25", True, "bm25")
    assert decision["reason"].endswith("so TOUR stays off: plain BM25, the application's own "
                                       "search, is the best candidate.")
    assert chosen["settings"] == tuned["applied"]["settings"] == {"index.tour.enabled": False}
    # what the index now holds says so, and nothing of the method left there before
    flat = httpx.get(f"{url}/{INDEX}/_settings/index.tour.*",
                     params={"flat_settings": "true"}).json()[INDEX]["settings"]
    assert flat == {"index.tour.enabled": "false"}
    # the report says why, beside each candidate's standing and cost
    assert "decision: No refining candidate beats bm25" in result.stdout
    assert "not measured" in result.stdout  # rerank-hybrid at 10 pairs: load.json has k 20
