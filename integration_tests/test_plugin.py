"""The Java plugin's index.tour.* settings, validated by the engines themselves."""

from __future__ import annotations

import httpx
import pytest

INDEX = "it-plugin"


@pytest.fixture(params=["opensearch", "elasticsearch"])
def engine_url(request, nodes) -> str:
    url = nodes[request.param].url
    httpx.delete(f"{url}/{INDEX}")
    assert httpx.put(f"{url}/{INDEX}").status_code == 200
    return url


def put_settings(url: str, settings: dict) -> httpx.Response:
    return httpx.put(f"{url}/{INDEX}/_settings", json={"index": settings})


def test_valid_tour_settings_are_stored(engine_url):
    response = put_settings(
        engine_url,
        {"tour.enabled": True, "tour.method": "tour-soft", "tour.k": 20, "tour.lambda": 0.3,
         "tour.vector_store_shards": 2},
    )
    assert response.status_code == 200
    stored = httpx.get(f"{engine_url}/{INDEX}/_settings?flat_settings=true").json()
    settings = stored[INDEX]["settings"]
    assert settings["index.tour.method"] == "tour-soft"
    assert settings["index.tour.k"] == "20"
    assert settings["index.tour.enabled"] == "true"
    assert settings["index.tour.vector_store_shards"] == "2"


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        ("tour.method", "bogus", "valid options are [tour-hard, tour-soft, rocchio"),
        ("tour.k", 0, "must be >= 1"),
        ("tour.k", 1001, "must be <= 1000"),
        ("tour.lambda", 1.5, "tour.lambda"),
        ("tour.labeler", "Bad Name", "tour.labeler"),
        ("tour.first_stage", "rerank", "valid options are [knn, bm25, hybrid-linear]"),
        ("tour.lexical_weight", 1.5, "tour.lexical_weight"),
        ("tour.pool", "rrf", "valid options are [interleave, hybrid-linear]"),
        ("tour.lexical", "oracle", "valid options are [rm3, none]"),
        ("tour.budget", 0, "must be >= 1"),
        ("tour.vector_store_shards", 0, "must be >= 1"),
        ("tour.vector_store_shards", 1025, "must be <= 1024"),
        ("tour.bm25_weight", -1, "must be >= 0.0"),
        ("tour.dense_weight", 11, "must be <= 10.0"),
        ("tour.no_such_setting", 1, "unknown setting"),
    ],
)
def test_bad_tour_settings_get_the_engines_own_400(engine_url, setting, value, reason):
    response = put_settings(engine_url, {setting: value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "illegal_argument_exception"
    assert reason in error["reason"]


def analyze(url: str, analyzer: str, text: str) -> list[str]:
    response = httpx.post(f"{url}/_analyze", json={"analyzer": analyzer, "text": text})
    assert response.status_code == 200, response.text
    return [token["token"] for token in response.json()["tokens"]]


def test_tour_english_is_lucenes_english_analysis_on_both_engines(nodes):
    text = "The patients' STUDIES were running; the mouse's cells"
    tokens = {name: analyze(status.url, "tour_english", text) for name, status in nodes.items()}
    assert tokens["opensearch"] == tokens["elasticsearch"] == [
        "patient", "studi", "were", "run", "mous", "cell"]
    # OpenSearch's own `english` (the analysis-common module es-tour installs) agrees
    assert analyze(nodes["opensearch"].url, "english", text) == tokens["opensearch"]
