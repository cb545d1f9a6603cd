"""A team's own index, refined through the sidecar: made by a plain client (not es-tour's
ingest), with its own field names, the engine's default analyzer, e5-small-v2 vectors that
`_source` leaves out, and its index.tour.* settings naming those fields and the encoder."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.models import DualEncoder, model_path
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.test_cli_engine import es_tour

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-foreign"
WIDE = "it-foreign-768"  # a 768-d field: the index's encoder (384-d) does not fit it
DOCS = 200
ENCODER = "e5-small-v2"
PASSAGE_CHARS = 600
# scored from the stored vectors (and BM25) alone: no labeler pairs
UNLABELLED = ("vector-rerank", "hybrid-linear")
QUERY = "vitamin D deficiency and bone health"
# small: the labeler runs on a shared CPU
TOUR_SETTINGS: dict[str, Any] = {
    "enabled": True, "text_fields": ["headline", "body"], "vector_field": "vec",
    "encoder": ENCODER, "labeler": "default", "k": 5, "max_rounds": 1, "budget": 10}


@dataclass
class Foreign:
    engine: str
    url: str  # the sidecar
    direct: str  # the engine itself


@pytest.fixture(scope="module")
def foreign_docs(scifact: BeirDataset) -> list[dict[str, Any]]:
    """DOCS SciFact docs as the team's records, embedded with e5-small-v2's passages."""
    directory = model_path(ENCODER)
    # `make test` builds it (`make models`): a missing model is a failure, not a skip
    assert directory.is_dir(), f"{ENCODER} is not built (`es-tour models build {ENCODER}`)"
    docs = list(itertools.islice(scifact.corpus(), DOCS))
    # each doc's opening only: a quarter of e5's 512 tokens, four times as fast on 2 cores
    vectors = DualEncoder(directory).encode_docs([f"{d.title} {d.text}"[:PASSAGE_CHARS]
                                                  for d in docs])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [{"_id": d.id, "headline": d.title, "body": d.text, "vec": v.tolist()}
            for d, v in zip(docs, vectors, strict=True)]


def _vector_mapping(engine: str, dimension: int) -> dict[str, Any]:
    if engine == "opensearch":
        return {"type": "knn_vector", "dimension": dimension,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}
    return {"type": "dense_vector", "dims": dimension, "index": True, "similarity": "cosine"}


def _create(url: str, engine: str, name: str, dimension: int) -> None:
    """The index as a team would make it: no analyzer named, vectors kept out of _source."""
    httpx.delete(f"{url}/{name}")
    settings: dict[str, Any] = {"number_of_shards": 1, "number_of_replicas": 0,
                                "tour": TOUR_SETTINGS}
    if engine == "opensearch":
        settings["knn"] = True
    mappings = {"_source": {"excludes": ["vec"]},
                "properties": {"headline": {"type": "text"}, "body": {"type": "text"},
                               "vec": _vector_mapping(engine, dimension)}}
    response = httpx.put(f"{url}/{name}", json={"settings": {"index": settings},
                                                "mappings": mappings})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module", params=ENGINES)
async def foreign(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                  foreign_docs: list[dict[str, Any]]) -> AsyncIterator[Foreign]:
    engine, url = request.param, nodes[request.param].url
    _create(url, engine, INDEX, 384)
    _create(url, engine, WIDE, 768)
    lines = "".join(json.dumps({"index": {"_id": doc["_id"]}}) + "\n"
                    + json.dumps({k: v for k, v in doc.items() if k != "_id"}) + "\n"
                    for doc in foreign_docs)
    response = httpx.post(f"{url}/{INDEX}/_bulk", params={"refresh": "true"}, content=lines,
                          headers={"content-type": "application/x-ndjson"}, timeout=120)
    assert response.status_code == 200 and not response.json()["errors"]
    wide = {"headline": "wide", "body": QUERY, "vec": np.full(768, 768 ** -0.5).tolist()}
    httpx.put(f"{url}/{WIDE}/_doc/1", params={"refresh": "true"}, json=wide).raise_for_status()
    config = ServerConfig(upstream=url, max_k=50, deadline_ms=120_000)
    with BackgroundServer(config, Models()) as server:
        yield Foreign(engine, server.url, url)


def _search(url: str, index: str, body: Any) -> httpx.Response:
    return httpx.post(f"{url}/{index}/_search", json=body, timeout=180)


def test_the_index_keeps_its_vectors_out_of_source_and_its_analyzer_is_the_engines(
        foreign: Foreign) -> None:
    doc = httpx.get(f"{foreign.direct}/{INDEX}/_doc/{'4983'}").json()
    assert doc["found"] and "vec" not in doc["_source"] and "headline" in doc["_source"]
    mapping = httpx.get(f"{foreign.direct}/{INDEX}/_mapping").json()[INDEX]["mappings"]
    assert "analyzer" not in mapping["properties"]["body"]


@pytest.mark.parametrize("method", ["tour-hard", "hybrid-tour", "hre", "vector-rerank",
                                    "hybrid-linear", "tour-agent"])
def test_every_method_refines_the_teams_index(foreign: Foreign, method: str) -> None:
    response = _search(foreign.url, INDEX, {"query": {"match": {"body": QUERY}}, "size": 5,
                                            "ext": {"tour": {"method": method}}})
    assert response.status_code == 200, response.text
    answer = response.json()
    tour = answer["ext"]["tour"]
    assert tour["method"] == method and tour["fallback"] is None and not tour["degraded"]
    assert tour["origins"]["k"] == "index"  # the index's own settings were read
    hits = answer["hits"]["hits"]
    assert hits and all(set(hit["_source"]) == {"headline", "body"} for hit in hits)
    if method not in UNLABELLED:  # the labelling methods judged docs with the labeler
        assert tour["pairs_scored"] > 0


def test_an_encoder_of_another_dimension_than_the_field_is_a_400_naming_both(
        foreign: Foreign) -> None:
    response = _search(foreign.url, WIDE, {"query": {"match": {"body": QUERY}}})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["status"] == 400 and error["error"]["type"] == "illegal_argument_exception"
    reason = error["error"]["reason"]
    assert f"[{ENCODER}]" in reason and "384-d" in reason and "768-d" in reason
    assert "[vec]" in reason and f"[{WIDE}]" in reason


def test_a_model_the_sidecar_cannot_open_is_a_400_naming_it(foreign: Foreign) -> None:
    for key in ("encoder", "labeler"):  # written through the sidecar: it reads them afresh
        httpx.put(f"{foreign.url}/{INDEX}/_settings",
                  json={f"index.tour.{key}": "models/no-such-model"}).raise_for_status()
        try:
            response = _search(foreign.url, INDEX, {"query": {"match": {"body": QUERY}}})
        finally:
            httpx.put(f"{foreign.url}/{INDEX}/_settings",
                      json={f"index.tour.{key}": TOUR_SETTINGS[key]}).raise_for_status()
        assert response.status_code == 400, response.text
        error = response.json()
        assert error["status"] == 400 and "models/no-such-model" in error["error"]["reason"]


async def test_the_adapter_reads_vectors_outside_source_from_doc_values(
        foreign: Foreign, foreign_docs: list[dict[str, Any]]) -> None:
    from es_tour.engines import connect
    from es_tour.errors import ConfigError

    stored = {doc["_id"]: np.asarray(doc["vec"], dtype=np.float32) for doc in foreign_docs}
    first, second = foreign_docs[0]["_id"], foreign_docs[1]["_id"]
    async with connect(foreign.engine, foreign.direct) as adapter:
        field = await adapter.vector_field(INDEX, "vec")
        assert (field.dimension, field.in_source) == (384, False)
        with pytest.raises(ConfigError, match=r"no vector field \[headline\]"):
            await adapter.vector_field(INDEX, "headline")
        # no doc holds it (yet): nothing known, and the kNN search is the engine's to refuse
        unknown = await adapter.vector_field(INDEX, "no_such_field")
        assert (unknown.dimension, unknown.in_source) == (None, True)
        plain = await adapter.docs_by_id(INDEX, [second, first])
        assert [h.vector for h in plain] == [None, None]  # _source has none to give
        reader = adapter.with_vector_field("vec", in_source=False)
        docs = await reader.docs_by_id(INDEX, [second, "no-such-doc", first])
        assert [h.id for h in docs] == [second, first]
        for hit in docs:
            assert set(hit.source) == {"headline", "body"}
            assert hit.vector is not None
            assert np.allclose(hit.vector, stored[hit.id], atol=1e-5)
        near = await reader.knn(INDEX, stored[first], 3, field="vec")
        assert near[0].id == first and all(h.vector is not None for h in near)
        assert all(h.vector is None for h in await reader.knn(INDEX, stored[first], 3,
                                                              field="vec", returns="text"))
        lexical = await reader.bm25(INDEX, QUERY, 3, fields=("headline", "body"))
        assert lexical and all(h.vector is not None and h.source for h in lexical)
        assert all(h.vector is None for h in await reader.bm25(
            INDEX, QUERY, 3, fields=("headline", "body"), exclude=["vec"]))


def test_a_labeler_from_a_model_directory_is_served(foreign: Foreign) -> None:
    directory = model_path("bge-small-en-v1.5")  # as `es-tour export` writes one
    response = _search(foreign.url, INDEX, {"query": {"match": {"body": QUERY}}, "size": 5,
                                            "ext": {"tour": {"method": "tour-hard"}}})
    by_name = response.json()
    httpx.put(f"{foreign.url}/{INDEX}/_settings",
              json={"index.tour.labeler": str(directory)}).raise_for_status()
    try:
        response = _search(foreign.url, INDEX, {"query": {"match": {"body": QUERY}}, "size": 5,
                                                "ext": {"tour": {"method": "tour-hard"}}})
    finally:
        httpx.put(f"{foreign.url}/{INDEX}/_settings",
                  json={"index.tour.labeler": "default"}).raise_for_status()
    assert response.status_code == 200, response.text
    tour = response.json()["ext"]["tour"]
    assert tour["origins"]["labeler"] == "index" and tour["pairs_scored"] > 0
    # the directory labels at fp32, the registry's default at int8: the same model's ranking
    assert {h["_id"] for h in response.json()["hits"]["hits"]} & \
        {h["_id"] for h in by_name["hits"]["hits"]}


def _judgements(scifact: BeirDataset, docs: list[dict[str, Any]], root: Path) -> Path:
    """The team's judgements of its own index: queries.jsonl and qrels/ naming the index's
    doc ids (SciFact's train and test judgements of its DOCS docs), and no corpus.jsonl."""
    ids = {doc["_id"] for doc in docs}
    (root / "qrels").mkdir(parents=True)
    judged: set[str] = set()
    for split in ("train", "test"):
        rows = [f"{qid}\t{doc}\t{grade}\n" for qid, grades in scifact.qrels(split).items()
                for doc, grade in grades.items() if doc in ids]
        judged |= {row.split("\t")[0] for row in rows}
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                                     + "".join(rows))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": text}) + "\n"
        for qid, text in scifact.queries().items() if qid in judged))
    return root


def test_eval_and_tune_search_the_teams_index_as_it_is(
        foreign: Foreign, foreign_docs: list[dict[str, Any]], scifact: BeirDataset,
        tmp_path: Path) -> None:
    """eval and tune on an index es-tour did not make: its own fields and encoder (from its
    index.tour.* settings), its vectors from doc values, nothing written but --apply's
    settings, and judgements without a corpus file."""
    data = _judgements(scifact, foreign_docs, tmp_path / "judged")
    before = httpx.get(f"{foreign.direct}/{INDEX}/_mapping").json()
    out = tmp_path / "eval.json"
    result = es_tour("eval", "--dataset", str(data), "--engine", foreign.engine, "--url",
                     foreign.direct, "--index", INDEX, "--methods", "knn,rerank:k=5",
                     "--labeler", "minilm-l6", "--output", str(out))
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert f"index {INDEX} is not es-tour's" in said
    assert "text fields headline,body, vector field vec and encoder e5-small-v2" in said
    ndcg = {label: m["ndcg@10"] for label, m in json.loads(out.read_text())["methods"].items()}
    # e5's query vectors against e5's doc vectors, read from doc values: measured 0.8957 on
    # OpenSearch (9 test queries)
    assert ndcg["knn"] > 0.6, ndcg
    tuned_out = tmp_path / "tune.json"
    result = es_tour("tune", "--dataset", str(data), "--engine", foreign.engine, "--url",
                     foreign.direct, "--index", INDEX, "--labeler", "minilm-l6", "--budgets",
                     "10", "--candidates", "rerank:first_stage=hybrid-linear,rerank-hybrid",
                     "--apply", "--output", str(tuned_out))
    try:
        assert result.returncode == 0, result.stderr
        tuned = json.loads(tuned_out.read_text())
        # train's 31 judged queries: 22 to fit, 9 for the guard; test's 9 report
        assert (tuned["fit_queries"], tuned["validation_queries"],
                tuned["held_out_queries"]) == (22, 9, 9)
        flat = httpx.get(f"{foreign.direct}/{INDEX}/_settings/index.tour.*",
                         params={"flat_settings": "true"}).json()[INDEX]["settings"]
        for key, value in tuned["applied"]["settings"].items():
            assert flat[key] == (str(value).lower() if isinstance(value, bool) else str(value))
        assert flat["index.tour.encoder"] == ENCODER  # the team's own settings are kept
    finally:
        reset = {f"index.tour.{key}": None for key in ("method", "pool", "lexical",
                                                       "bm25_weight", "dense_weight")}
        reset.update({f"index.tour.{key}": value for key, value in TOUR_SETTINGS.items()})
        httpx.put(f"{foreign.direct}/{INDEX}/_settings", json=reset).raise_for_status()
    assert httpx.get(f"{foreign.direct}/{INDEX}/_mapping").json() == before
    count = httpx.get(f"{foreign.direct}/{INDEX}/_count").json()["count"]
    assert count == DOCS
    # a mistyped index: judgements alone cannot build one
    result = es_tour("eval", "--dataset", str(data), "--engine", foreign.engine, "--url",
                     foreign.direct, "--index", "it-no-such-index", "--methods", "knn")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "index [it-no-such-index] does not exist" in result.stderr
    assert "no corpus.jsonl to build it from" in result.stderr
