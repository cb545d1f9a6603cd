"""`es-tour tune` learns from the judgements it is given: on a collection with enough judged
queries it trains a labeler of the index's own (the default labeler's query tower,
cross-fitted on the fitting queries alone), chooses it where it fits and holds up on the
validation queries, applies it, and a sidecar serves it.

The collection is built here: 120 training questions about vitamin D and bones, and 12
test questions worded apart, all judging one doc relevant that shares no word with them and
that the default labeler does not rank first. No labeler-free search finds it first; a tower
tuned on the questions does, on questions it never trained on.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.models import DualEncoder
from es_tour.models._corpus_cache import _cache_files
from es_tour.models._labelers import labeler_precision, model_directory
from es_tour.paths import models_dir
from es_tour.server import BackgroundServer, ServerConfig
from tests.models.test_query_tower import TAUGHT, TEXTS

pytestmark = pytest.mark.training

ENGINE = "opensearch"
INDEX = "it-tune-labeler"
TUNED = f"bge-small-en-v1.5-{INDEX}-tuned"  # the default labeler's, named by the index
SUBJECTS = ("vitamin D", "vitamin D supplements", "taking vitamin D", "vitamin D intake",
            "high dose vitamin D", "daily vitamin D", "vitamin D tablets",
            "vitamin D in winter", "cod liver oil vitamin D", "vitamin D drops")
PREDICATES = ("and bone health", "for strong bones", "to prevent weak bones",
              "and the skeleton", "and brittle bones", "and bone strength",
              "for bone density", "against fractures", "for osteoporosis",
              "and healthy bones", "and bone loss", "for bone growth")
TEST_SUBJECTS = ("vitamin D pills", "extra vitamin D", "vitamin D levels")
TEST_PREDICATES = ("and bones", "for the bones", "and weak bones", "and bone fractures")


def bones_collection(root: Path) -> Path:
    """TEXTS as the corpus; every question, train and test, judging TAUGHT relevant."""
    (root / "qrels").mkdir(parents=True)
    train = [f"{s} {p}" for s, p in itertools.product(SUBJECTS, PREDICATES)]
    test = [f"{s} {p}" for s, p in itertools.product(TEST_SUBJECTS, TEST_PREDICATES)]
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": str(i), "title": "", "text": text}) + "\n"
        for i, text in enumerate(TEXTS)))
    queries = [(f"train-{i}", text) for i, text in enumerate(train)] + [
        (f"test-{i}", text) for i, text in enumerate(test)]
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries))
    for split in ("train", "test"):
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
            f"{qid}\t{TAUGHT}\t1\n" for qid, _ in queries if qid.startswith(split)))
    return root


@pytest.fixture
def fresh_node(start_node: Callable[[str], NodeStatus]) -> Iterator[str]:
    """The node's URL with no `INDEX` and no tuned labeler of it, both removed after."""
    url = start_node(ENGINE).url
    httpx.delete(f"{url}/{INDEX}")
    shutil.rmtree(models_dir() / TUNED, ignore_errors=True)
    yield url
    httpx.delete(f"{url}/{INDEX}")
    shutil.rmtree(models_dir() / TUNED, ignore_errors=True)


def _tune(data: Path, url: str, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "es_tour", "tune", "--dataset", str(data), "--engine", ENGINE,
         "--url", url, "--index", INDEX, "--budgets", "10",
         "--candidates", "rerank:first_stage=hybrid-linear", "--tuning-queries", "50",
         "--apply", "--output", str(output)],
        capture_output=True, text=True, timeout=1200)


def _forget_corpus_vectors(data: Path) -> None:
    """The default labeler's cached vectors of this corpus removed: tune embeds them."""
    encoder = DualEncoder(model_directory("default")[0], labeler_precision("default"))
    texts = [doc.contents for doc in BeirDataset(data).corpus()]
    for path in _cache_files(encoder, data / "corpus.jsonl", texts):
        path.unlink(missing_ok=True)


def test_tune_trains_chooses_and_applies_a_labeler_a_sidecar_serves(fresh_node, tmp_path):
    url = fresh_node
    data = bones_collection(tmp_path / "bones")
    _forget_corpus_vectors(data)
    output = tmp_path / "tune.json"
    result = _tune(data, url, output)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert f"embedding the corpus's {len(TEXTS)} docs with bge-small-en-v1.5 first" in said
    assert f"training a labeler of the index's own, {TUNED}" in said
    tuned = json.loads(output.read_text())
    trained = tuned["tuned_labeler"]
    assert trained["trained"] is True and trained["name"] == TUNED
    # trained on the fitting queries alone: the validation and held-out ones never
    facts = json.loads((models_dir() / TUNED / "training.json").read_text())
    assert set(facts["trained"]) == set(tuned["fit_qids"])
    assert trained["cross_fitted_ndcg@10"]["tuned"] > trained["cross_fitted_ndcg@10"]["base"]
    chosen = tuned["budgets"]["10"]
    fits = {each["labeler"]: each["fit_ndcg@10"] for each in chosen["candidates"]}
    assert set(fits) == {"default", TUNED} and fits[TUNED] > fits["default"]
    assert chosen["labeler"] == TUNED and not chosen["off"]
    assert chosen["settings"]["index.tour.labeler"] == TUNED
    # the held-out report, split by whether the fitting queries judged a relevant doc of
    # each: every test question's one doc was
    apart = chosen["held_out"][chosen["recommended"]]["apart"]
    assert apart["a judged doc seen"]["queries"] == len(TEST_SUBJECTS) * len(TEST_PREDICATES)
    assert apart["judged docs new"]["queries"] == 0
    assert "held-out queries whose relevant docs include one the fitting queries judged" in said
    flat = httpx.get(f"{url}/{INDEX}/_settings/index.tour.*",
                     params={"flat_settings": "true"}).json()[INDEX]["settings"]
    assert flat["index.tour.labeler"] == TUNED and flat["index.tour.enabled"] == "true"
    # a sidecar serves the index as tune left it: the tuned labeler ranks the taught doc
    # first for the test questions, which no tower trained on
    with BackgroundServer(ServerConfig(upstream=url, deadline_ms=120_000)) as sidecar:
        for question in (f"{s} {p}" for s, p in zip(TEST_SUBJECTS, TEST_PREDICATES,
                                                     strict=False)):
            response = httpx.post(f"{sidecar.url}/{INDEX}/_search", timeout=120, json={
                "query": {"match": {"text": question}}, "size": 3})
            assert response.status_code == 200, response.text
            tour = response.json()["ext"]["tour"]
            assert tour["degraded"] is False
            assert response.json()["hits"]["hits"][0]["_id"] == TAUGHT, tour
        stats = httpx.get(f"{sidecar.url}/_tour/stats").json()
    assert TUNED in json.dumps(stats)
    # run again on the same queries, tune reuses the labeler it trained
    again = _tune(data, url, tmp_path / "again.json")
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.json").read_text())["tuned_labeler"]["reused"] is True
