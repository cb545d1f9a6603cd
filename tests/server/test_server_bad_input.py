"""Hostile input is a 4xx in the engine's error shape, decided before any engine or model call."""

from __future__ import annotations

import json

import numpy as np
import pytest
from starlette.testclient import TestClient

from es_tour.agents import LearnedOptions, OracleOptions, policy_dir
from es_tour.errors import (
    BodyTooLargeError,
    ConfigError,
    EngineError,
    InternalError,
    NotFoundError,
    OverloadedError,
)
from es_tour.pipeline._first_stage import FirstStageOptions
from es_tour.pipeline._tour_loop import RocchioOptions
from es_tour.server import ServerConfig, create_app
from es_tour.server._options import index_settings
from es_tour.server._request import check_path, parse_body, parse_search
from es_tour.tour import TourConfig, rocchio

MATCH = {"query": {"match": {"text": "q"}}}


@pytest.mark.parametrize("raw", [
    b'{"size": 1e999}', b'{"size": -1e999}', b'{"size": NaN}', b'{"size": Infinity}',
    b'{"size": ' + b"9" * 5000 + b"}", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b"[" * 100_000,
])
def test_json_that_would_overflow_or_recurse_is_a_400(raw: bytes) -> None:
    with pytest.raises(ConfigError) as error:
        parse_body(raw)
    assert error.value.status == 400 and len(str(error.value)) < 200


def test_ordinary_numbers_still_parse() -> None:
    assert parse_body(b'{"size": 3, "x": -2.5e3, "n": 12345678901234567890}') == \
        {"size": 3, "x": -2500.0, "n": 12345678901234567890}


@pytest.mark.parametrize("path", [b"//_cluster/health", b"//", b"/idx/%zz", b"/a b", b"*",
                                  b"/\x00", b"/caf\xc3\xa9",
                                  b"/_search/<", b"/{x}", b"/a|b"])
def test_paths_that_are_no_valid_url_are_a_400(path: bytes) -> None:
    with pytest.raises(ConfigError, match="invalid URL path"):
        check_path(path)


@pytest.mark.parametrize("path", [b"/", b"/_cluster/health", b"/a,b*/_search",
                                  b"/%3Clogs-%7Bnow%2Fd%7D%3E/_search", b"/idx/_doc/a:b@c"])
def test_valid_paths_pass(path: bytes) -> None:
    check_path(path, b"pretty&h=index,docs.count&q=title:x%20y&scroll=1m")


@pytest.mark.parametrize("query", [b"q=a b", b"q=a\tb", b"q=\x00", b"q=caf\xc3\xa9"])
def test_query_strings_no_request_line_may_carry_are_a_400(query: bytes) -> None:
    with pytest.raises(ConfigError, match="invalid URL query"):
        check_path(b"/_search", query)


@pytest.mark.parametrize("query", [b"q=title:[a%20TO%20z]", b'q="x"', b"q=a|b^2", b"x=%g0"])
def test_query_strings_the_engine_judges_pass(query: bytes) -> None:
    check_path(b"/_search", query)


@pytest.mark.parametrize("vector", [[0.0, 0.0], [1e300, 1.0], [1.0, -1e39]])
def test_zero_and_non_finite_query_vectors_are_a_400(vector: list[float]) -> None:
    body = {"knn": {"field": "e", "query_vector": vector}, "ext": {"tour": {"query_text": "q"}}}
    with pytest.raises(ConfigError, match="finite and not all zeros"):
        parse_search("idx", {}, body, explicit=True)


@pytest.mark.parametrize(("params", "body"), [
    ({}, {**MATCH, "size": 1.5}), ({}, {**MATCH, "size": True}), ({"size": "1e999"}, MATCH),
    ({"from": "9" * 5000}, MATCH),
    ({}, {"knn": {"field": 7, "query_vector": [1.0]}, "ext": {"tour": {"query_text": "q"}}}),
])
def test_bad_paging_and_fields_are_400s(params: dict, body: dict) -> None:
    with pytest.raises(ConfigError):
        parse_search("idx", params, body, explicit=True)


@pytest.mark.parametrize(("build", "options", "named"), [
    (RocchioOptions.from_mapping, {"k_prime": 0}, "k_prime"),
    (RocchioOptions.from_mapping, {"k_prime": 10_001}, "k_prime"),
    (RocchioOptions.from_mapping, {"beta": float("nan")}, "beta"),
    (RocchioOptions.from_mapping, {"lam": 2}, "lam"),
    (FirstStageOptions.from_mapping, {"rrf_k": -61}, "rrf_k"),
    (FirstStageOptions.from_mapping, {"k": "5"}, "k"),
    (TourConfig.from_mapping, {"lr": float("inf")}, "tour.lr"),
    (TourConfig.from_mapping, {"tau": 1e-300}, "tour.tau"),
    (TourConfig.from_mapping, {"max_rounds": 10**9}, "tour.max_rounds"),
    (LearnedOptions.from_mapping, {"threshold": "high"}, "threshold"),
    (LearnedOptions.from_mapping, {"top_k": 5, "k": 10}, "top_k"),
    (OracleOptions.from_mapping, {"qrels": "x", "queries": {"1": "q"}}, "qrels"),
])
def test_every_method_option_has_bounds(build, options: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        build(options)


@pytest.mark.parametrize("policy", ["/etc", "../agent-policy", "~root", "a/b", "", 5, "A"])
def test_a_learned_policy_is_a_registry_name_never_a_path(policy) -> None:
    with pytest.raises(ConfigError, match="registry name") as error:
        LearnedOptions.from_mapping({"policy": policy})
    assert "exist" not in str(error.value)


def test_an_untrained_policy_is_a_404_that_names_no_path(tmp_path, monkeypatch) -> None:
    from es_tour.agents import learned_agent

    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path))  # a registry of its own: empty
    name = "no-such-policy-trained"
    assert not policy_dir(name).exists()
    with pytest.raises(NotFoundError) as error:
        learned_agent(None, {"policy": name})  # type: ignore[arg-type]
    assert error.value.status == 404 and "/" not in str(error.value).split(";")[0]


def test_numeric_errors_of_tour_name_the_bad_value_as_400s() -> None:
    q, C = np.ones(2), np.eye(2)
    with pytest.raises(ConfigError, match="k_prime must be in") as error:
        rocchio(q, C, 0, 1.0, 0.75, 0.15)
    assert error.value.status == 400


def test_bad_index_settings_are_400s_not_crashes() -> None:
    with pytest.raises(ConfigError, match=r"index\.tour\.k"):
        index_settings({"index.tour.k": "many"})


def test_the_error_table_gives_every_status_in_the_engines_shape() -> None:
    errors = [ConfigError("x"), NotFoundError("x"), BodyTooLargeError("x"),
              OverloadedError("x", 2), InternalError()]
    assert [e.status for e in errors] == [400, 404, 413, 429, 500]
    for error in errors:
        body = error.to_engine_error()
        assert set(body) == {"error", "status"}
        assert set(body["error"]) == {"root_cause", "type", "reason"}
        assert body["error"]["root_cause"] == [{"type": body["error"]["type"],
                                                "reason": body["error"]["reason"]}]
    assert OverloadedError("x", 2).headers == {"Retry-After": "2"}
    engine_404 = {"error": {"type": "index_not_found_exception", "reason": "no such index"},
                  "status": 404}
    assert EngineError(404, engine_404).to_engine_error() == engine_404


@pytest.fixture
def app_client() -> TestClient:
    # nothing listens upstream: these requests must be answered before any engine call
    config = ServerConfig(upstream="http://127.0.0.1:9", max_body_bytes=1000, preload=False)
    return TestClient(create_app(config), raise_server_exceptions=False)


def test_a_body_past_the_limit_is_a_413(app_client: TestClient) -> None:
    body = json.dumps({**MATCH, "pad": "x" * 2000})
    response = app_client.post("/idx/_search", content=body,
                               headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "content_too_long_exception"


def test_a_double_slash_path_is_a_400_in_the_engines_shape(app_client: TestClient) -> None:
    response = app_client.get("http://testserver//_cluster/health")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "illegal_argument_exception"
