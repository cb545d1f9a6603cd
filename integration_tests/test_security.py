"""The sidecar in front of a secured OpenSearch: every caller keeps its own identity.

The fixture starts OpenSearch with the Security plugin through the CLI's code path
(`es-tour engine start --security`): `reader-a` may read indices tour-a* only, `reader-ab`
tour-a* and tour-b* (and their settings), `reader-index` tour-a* and their settings with no
cluster permission at all. The sidecar holds no credentials of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from es_tour.cluster import LocalNode
from es_tour.engines import connect
from es_tour.errors import ConfigError
from es_tour.ingest import ingest
from es_tour.paths import models_dir
from es_tour.server import BackgroundServer, Models, ServerConfig
from es_tour.server._options import method_names
from integration_tests.conftest import PLUGIN_ZIPS, TEST_PORTS

SECURED_PORT = TEST_PORTS["opensearch"] + 30
INDEX_A, INDEX_B = "tour-a-scifact", "tour-b-scifact"
DOCS = 120
QUERY = "vitamin D deficiency"
SMALL = {"k": 5, "max_rounds": 1}  # the labeler runs on a shared CPU
# Options each method needs beyond SMALL (the oracle reads relevance judgements).
EXTRA: dict[str, dict[str, Any]] = {
    "oracle-agent": {"qrels": {"q": {"4983": 1}}, "queries": {"q": QUERY}},
}
POLICY = models_dir() / "agent-policy"  # what learned-agent loads by default
_ROUNDS = {"tour-hard", "tour-soft", "rm3-agent", "learned-agent", "oracle-agent"}


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalNode]:
    node = LocalNode("opensearch", SECURED_PORT, heap="640m", security=True)
    started = node.pid() is None
    node.start(plugins=[PLUGIN_ZIPS["opensearch"]])
    yield node
    if started:
        node.stop()


@pytest.fixture(scope="module")
async def indices(secured: LocalNode, scifact, sidecar_models: Models) -> None:
    """The first SciFact docs in A (TOUR on by its settings) and in B, made by the admin."""
    user, password = secured.credentials("admin")  # type: ignore[misc]
    admin_url = f"http://{user}:{password}@127.0.0.1:{secured.port}"
    async with connect("opensearch", admin_url) as admin:
        for name in (INDEX_A, INDEX_B):
            await ingest(admin, scifact, name, sidecar_models.encoder, max_docs=DOCS, replace=True,
                         reuse_embeddings=False, show_progress=False)
    response = httpx.put(f"{secured.url}/{INDEX_A}/_settings", auth=(user, password),
                         json={"index": {"tour": {"enabled": True, "method": "tour-hard",
                                                  **SMALL}}})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def sidecar(secured: LocalNode, indices: None, sidecar_models: Models) -> Iterator[str]:
    with BackgroundServer(ServerConfig(upstream=secured.url, max_k=50), sidecar_models) as server:
        yield server.url


def _as(secured: LocalNode, user: str) -> tuple[str, str]:
    credentials = secured.credentials(user)
    assert credentials is not None
    return credentials


def _search(url: str, index: str, auth: tuple[str, str], tour: dict | None = None
            ) -> httpx.Response:
    body: dict[str, Any] = {"query": {"match": {"text": QUERY}}, "size": 3}
    if tour is not None:
        body["ext"] = {"tour": tour}
    return httpx.post(f"{url}/{index}/_search", json=body, auth=auth, timeout=300)


def _forbidden(response: httpx.Response) -> None:
    _forbidden_to("reader-a", response)


def _forbidden_to(user: str, response: httpx.Response) -> None:
    """The engine's own 403 for `user`."""
    assert response.status_code == 403, response.text
    payload = response.json()
    assert payload["status"] == 403 and payload["error"]["type"] == "security_exception"
    assert f"name={user}," in payload["error"]["reason"]


def _options(method: str) -> dict[str, Any]:
    options = {"k": SMALL["k"], **EXTRA.get(method, {})}
    if method in _ROUNDS:
        options["max_rounds"] = SMALL["max_rounds"]
    return {"method": method, **options}


def test_pass_through_keeps_the_callers_identity(secured: LocalNode, sidecar: str) -> None:
    for user in ("reader-a", "reader-ab"):
        response = httpx.get(f"{sidecar}/_plugins/_security/authinfo", auth=_as(secured, user))
        assert response.status_code == 200 and response.json()["user_name"] == user
    assert httpx.get(f"{sidecar}/_plugins/_security/authinfo").status_code == 401


def test_reader_a_gets_the_engines_403_for_b_with_and_without_tour_through_every_method(
        secured: LocalNode, sidecar: str) -> None:
    reader_a, reader_ab = _as(secured, "reader-a"), _as(secured, "reader-ab")
    _forbidden(_search(sidecar, INDEX_B, reader_a))
    direct = _search(secured.url, INDEX_B, reader_a)
    assert _search(sidecar, INDEX_B, reader_a).json() == direct.json()
    for method in method_names():
        if method == "learned-agent" and not POLICY.is_dir():
            # no policy is built here: the agent cannot start, for either reader
            refused = _search(sidecar, INDEX_B, reader_a, _options(method))
            assert refused.status_code != 200 and "hits" not in refused.json()
            continue
        _forbidden(_search(sidecar, INDEX_B, reader_a, _options(method)))
        allowed = _search(sidecar, INDEX_B, reader_ab, _options(method))
        assert allowed.status_code == 200, (method, allowed.text)
        assert allowed.json()["ext"]["tour"]["method"] == method
        assert allowed.json()["hits"]["hits"], method


def test_nothing_leaks_between_callers_through_the_caches(secured: LocalNode,
                                                          sidecar: str) -> None:
    reader_a, reader_ab = _as(secured, "reader-a"), _as(secured, "reader-ab")
    tour = {"method": "tour-hard", **SMALL}
    assert _search(sidecar, INDEX_B, reader_ab, tour).status_code == 200
    _forbidden(_search(sidecar, INDEX_B, reader_a, tour))  # same query, labels and settings
    _forbidden(_search(sidecar, INDEX_B, reader_a))
    # A's settings turn TOUR on; reader-ab may read them, reader-a may not: reader-a's
    # search stays a plain one, however recently reader-ab's primed the settings cache.
    served = _search(sidecar, INDEX_A, reader_ab)
    assert served.status_code == 200 and served.json()["ext"]["tour"]["method"] == "tour-hard"
    plain = _search(sidecar, INDEX_A, reader_a)
    assert plain.status_code == 200 and "ext" not in plain.json()
    assert plain.json()["hits"]["hits"]
    # ...and asked for explicitly, reader-a gets TOUR on the index it may read.
    asked = _search(sidecar, INDEX_A, reader_a, tour)
    assert asked.status_code == 200 and asked.json()["ext"]["tour"]["method"] == "tour-hard"


@pytest.mark.parametrize(("user", "tour"), [
    ("reader-index", None),  # TOUR by A's settings, which reader-index may read
    ("reader-a", {"method": "tour-hard", **SMALL}),  # asked for: reader-a may not read them
])
def test_a_fresh_sidecars_first_caller_needs_no_cluster_permission(
        secured: LocalNode, indices: None, sidecar_models: Models, user: str,
        tour: dict[str, Any] | None) -> None:
    """A new sidecar cannot learn the engine's kind at startup (the anonymous GET / is
    refused) and its first caller may not GET / either: searching an index the caller may
    read is enough, whoever comes first."""
    auth = _as(secured, user)
    assert httpx.get(secured.url).status_code == 401
    assert httpx.get(secured.url, auth=auth).status_code == 403
    with BackgroundServer(ServerConfig(upstream=secured.url, max_k=50), sidecar_models) as server:
        first = _search(server.url, INDEX_A, auth, tour)
        assert first.status_code == 200, first.text
        assert first.json()["ext"]["tour"]["method"] == "tour-hard"
        assert first.json()["hits"]["hits"]
        _forbidden_to(user, _search(server.url, INDEX_B, auth, tour))


def test_engine_errors_keep_their_status_and_body(secured: LocalNode, sidecar: str) -> None:
    reader_ab = _as(secured, "reader-ab")
    tour = {"method": "tour-hard", **SMALL}
    missing = _search(sidecar, "tour-a-missing", reader_ab, tour)
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["type"] == "index_not_found_exception"
    wrong = ("reader-ab", "not-the-password")
    for index in (INDEX_A, INDEX_B):  # 401 on the settings lookup, each time: never cached
        for request_tour in (None, tour):
            response = _search(sidecar, index, wrong, request_tour)
            assert response.status_code == 401, response.text
    assert _search(sidecar, INDEX_A, reader_ab).json()["ext"]["tour"]["method"] == "tour-hard"


def test_no_password_in_any_error_or_log_line(secured: LocalNode, sidecar: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    passwords = [_as(secured, user)[1] for user in ("admin", "reader-a", "reader-ab")]
    answers = [
        _search(sidecar, INDEX_B, _as(secured, "reader-a"), {"method": "tour-hard", **SMALL}),
        _search(sidecar, INDEX_B, ("reader-a", passwords[0]), {"method": "knn"}),
        httpx.get(f"{sidecar}/_cluster/settings", auth=_as(secured, "reader-a")),
    ]
    assert [answer.status_code for answer in answers] == [403, 401, 403]
    with pytest.raises(ConfigError) as refused:
        ServerConfig(upstream=f"http://admin:{passwords[0]}@127.0.0.1:{secured.port}")
    text = "\n".join([*(a.text for a in answers), str(refused.value), caplog.text,
                      *(str(r.args) for r in caplog.records)])
    assert caplog.records  # the sidecar and its client did log these requests
    assert not [password for password in passwords if password in text]


def test_the_sidecars_settings_identity_shapes_no_answer_for_a_caller_who_may_not_read(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """With --settings-credentials the sidecar reads B's settings as admin; reader-a, who
    may not read B, must still get the engine's 403, not an error naming B's settings."""
    admin = _as(secured, "admin")
    settings_url = f"{secured.url}/{INDEX_B}/_settings"
    # k past this sidecar's max_k: a caller the settings reach gets a 400 that quotes k
    enabled = {"index": {"tour": {"enabled": True, "method": "tour-hard", "k": 60}}}
    assert httpx.put(settings_url, auth=admin, json=enabled).status_code == 200
    config = ServerConfig(upstream=secured.url, max_k=50,
                          settings_credentials=":".join(admin))
    try:
        with BackgroundServer(config, sidecar_models) as server:
            past_max = _search(server.url, INDEX_B, _as(secured, "reader-ab"))
            assert past_max.status_code == 400 and "k [60]" in past_max.text
            refused = _search(server.url, INDEX_B, _as(secured, "reader-a"))
            _forbidden(refused)
            assert "k [60]" not in refused.text
    finally:
        reset = {"index": {"tour": {"enabled": None, "method": None, "k": None}}}
        assert httpx.put(settings_url, auth=admin, json=reset).status_code == 200
