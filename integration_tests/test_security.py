"""The sidecar in front of a secured OpenSearch: every caller keeps its own identity.

The fixture starts OpenSearch with the Security plugin through the CLI's code path
(`es-tour engine start --security`): `reader-a` may read indices tour-a* only, `reader-ab`
tour-a* and tour-b* (and their settings), `reader-index` tour-a* and their settings with no
cluster permission at all. The sidecar holds no credentials of its own.

Every hop is HTTPS: the clients here and the sidecars trust the node's own CA only, and the
sidecars listen with the certificate that CA signed for them.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from es_tour.cli import app
from es_tour.cluster import LocalNode
from es_tour.engines import connect
from es_tour.errors import ConfigError
from es_tour.ingest import ingest
from es_tour.models import DualEncoderLabeler
from es_tour.paths import models_dir
from es_tour.pipeline import store_index
from es_tour.server import BackgroundServer, Models, ServerConfig
from es_tour.server._options import method_names
from es_tour.tls import UpstreamTls
from integration_tests.conftest import PLUGIN_ZIPS, TEST_PORTS, remember_scifact

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


def _node() -> LocalNode:
    return LocalNode("opensearch", SECURED_PORT, heap="640m", security=True)


@functools.cache
def _tls() -> UpstreamTls:
    """The node's CA, which signed its certificate and the sidecar's (made on first start)."""
    return UpstreamTls(ca_certs=_node().ca_certs)


@functools.cache
def _http() -> httpx.Client:
    """A client that trusts the node's CA and nothing else. It keeps no connection open: a
    sidecar stopping with an idle TLS connection would wait out its drain time for the
    client's close_notify, which a client left for the garbage collector never sends."""
    return httpx.Client(verify=_tls().context(), timeout=300,
                        limits=httpx.Limits(max_keepalive_connections=0))


def _config(secured: LocalNode, **options: Any) -> ServerConfig:
    """A sidecar that checks the node's certificate and listens on HTTPS itself."""
    cert, key = secured.security.sidecar_cert
    return ServerConfig(upstream=secured.url, max_k=50, upstream_tls=_tls(),
                        tls_cert=str(cert), tls_key=str(key), **options)


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalNode]:
    node = _node()
    started = node.pid() is None
    node.start(plugins=[PLUGIN_ZIPS["opensearch"]])
    yield node
    if started:
        node.stop()


@pytest.fixture(scope="module")
async def indices(secured: LocalNode, scifact, sidecar_models: Models) -> None:
    """The first SciFact docs in A (TOUR on by its settings) and in B, made by the admin."""
    user, password = secured.credentials("admin")  # type: ignore[misc]
    async with connect("opensearch", secured.url, _tls(), (user, password)) as admin:
        for name in (INDEX_A, INDEX_B):
            await ingest(admin, scifact, name, sidecar_models.encoder, max_docs=DOCS, replace=True,
                         reuse_embeddings=False, show_progress=False)
    remember_scifact(sidecar_models, scifact, INDEX_A, INDEX_B)
    response = _http().put(f"{secured.url}/{INDEX_A}/_settings", auth=(user, password),
                         json={"index": {"tour": {"enabled": True, "method": "tour-hard",
                                                  **SMALL}}})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def sidecar(secured: LocalNode, indices: None, sidecar_models: Models) -> Iterator[str]:
    with BackgroundServer(_config(secured), sidecar_models) as server:
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
    return _http().post(f"{url}/{index}/_search", json=body, auth=auth)


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
        response = _http().get(f"{sidecar}/_plugins/_security/authinfo", auth=_as(secured, user))
        assert response.status_code == 200 and response.json()["user_name"] == user
    assert _http().get(f"{sidecar}/_plugins/_security/authinfo").status_code == 401


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
    assert _http().get(secured.url).status_code == 401
    assert _http().get(secured.url, auth=auth).status_code == 403
    with BackgroundServer(_config(secured), sidecar_models) as server:
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
        _http().get(f"{sidecar}/_cluster/settings", auth=_as(secured, "reader-a")),
    ]
    assert [answer.status_code for answer in answers] == [403, 401, 403]
    with pytest.raises(ConfigError) as refused:
        ServerConfig(upstream=f"http://admin:{passwords[0]}@127.0.0.1:{secured.port}")
    text = "\n".join([*(a.text for a in answers), str(refused.value), caplog.text,
                      *(str(r.args) for r in caplog.records)])
    assert caplog.records  # the sidecar and its client did log these requests
    assert not [password for password in passwords if password in text]


def test_the_sidecars_service_identity_shapes_no_answer_for_a_caller_who_may_not_read(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """With --service-credentials the sidecar reads B's settings as its service user;
    reader-a, who may not read B, must still get the engine's 403, not an error naming B's
    settings."""
    admin = _as(secured, "admin")
    settings_url = f"{secured.url}/{INDEX_B}/_settings"
    # k past this sidecar's max_k: a caller the settings reach gets a 400 that quotes k
    enabled = {"index": {"tour": {"enabled": True, "method": "tour-hard", "k": 60}}}
    assert _http().put(settings_url, auth=admin, json=enabled).status_code == 200
    config = _config(secured, service_credentials=":".join(_as(secured, "es-tour-service")))
    try:
        with BackgroundServer(config, sidecar_models) as server:
            past_max = _search(server.url, INDEX_B, _as(secured, "reader-ab"))
            assert past_max.status_code == 400 and "k [60]" in past_max.text
            refused = _search(server.url, INDEX_B, _as(secured, "reader-a"))
            _forbidden(refused)
            assert "k [60]" not in refused.text
    finally:
        reset = {"index": {"tour": {"enabled": None, "method": None, "k": None}}}
        assert _http().put(settings_url, auth=admin, json=reset).status_code == 200


def test_every_hop_is_https_and_checks_its_peer(secured: LocalNode, sidecar: str,
                                               sidecar_models: Models) -> None:
    reader_a = _as(secured, "reader-a")
    assert secured.url.startswith("https://") and sidecar.startswith("https://")
    assert _search(sidecar, INDEX_A, reader_a, {"method": "knn"}).status_code == 200
    # a client that trusts only the system's CAs refuses both the sidecar and the node
    for url in (sidecar, secured.url):
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(url, auth=reader_a)
    # so does a sidecar given no CA: verification is on by default, and the caller gets
    # a 502 in the engine's shape, not the engine's answer
    with BackgroundServer(ServerConfig(upstream=secured.url), sidecar_models) as unverified:
        refused = httpx.get(f"{unverified.url}/_plugins/_security/authinfo", auth=reader_a)
    assert refused.status_code == 502, refused.text
    assert refused.json()["error"]["type"] == "upstream_exception"
    assert "certificate" in refused.json()["error"]["reason"].lower()


def test_the_cli_reaches_the_node_over_https_as_the_environments_user(
        secured: LocalNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = tmp_path / "tiny"
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text("\n".join(
        json.dumps({"_id": f"d{n}", "title": "vitamin D", "text": f"deficiency {n}"})
        for n in range(3)))
    (dataset / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": QUERY}))
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    index = "tour-a-cli"
    args = ["index", "--dataset", str(dataset), "--index", index, "--url", secured.url,
            "--replace"]
    runner = CliRunner()
    for user in ("admin", "reader-a"):
        monkeypatch.setenv("ES_TOUR_USER", user)
        monkeypatch.setenv("ES_TOUR_PASSWORD", _as(secured, user)[1])
        untrusted = runner.invoke(app, args)  # the system's CAs do not know the node's
        assert untrusted.exit_code == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.output
        trusted = runner.invoke(app, [*args, "--ca-certs", str(secured.ca_certs)])
        if user == "admin":
            assert trusted.exit_code == 0, trusted.output
        else:  # the engine judges the environment's user: reader-a may not write
            assert trusted.exit_code == 1 and "AuthorizationException(403" in trusted.output
    count = _http().get(f"{secured.url}/{index}/_count", auth=_as(secured, "admin"))
    assert count.status_code == 200 and count.json()["count"] == 3


def _stats(url: str, secured: LocalNode) -> dict[str, Any]:
    """The sidecar's stats, as an operator reads them (GET _cluster/health is allowed)."""
    response = _http().get(f"{url}/_tour/stats", auth=_as(secured, "admin"))
    assert response.status_code == 200, response.text
    return dict(response.json()["es_tour"])


def test_the_vector_store_is_the_service_identitys_alone(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """A caller with index permissions only gets a refined search whose doc vectors the
    sidecar stores as its service user; no caller may read the store itself."""
    labeler = sidecar_models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    store, admin = store_index(labeler), _as(secured, "admin")
    _http().delete(f"{secured.url}/{store}", auth=admin)
    labeler.clear_cache()
    service = _as(secured, "es-tour-service")
    config = _config(secured, service_credentials=":".join(service))
    with BackgroundServer(config, sidecar_models) as server:
        refined = _search(server.url, INDEX_A, _as(secured, "reader-index"),
                          {"method": "rerank", "k": 5})
        assert refined.status_code == 200 and refined.json()["ext"]["tour"]["degraded"] is False
        for _ in range(100):  # the writer flushes every second
            if _stats(server.url, secured)["store_docs_written"]["total"] >= 5:
                break
            time.sleep(0.1)
        counts = _stats(server.url, secured)
    assert counts["store_docs_written"]["total"] >= 5 and counts["store_failures"]["total"] == 0
    read = {"query": {"match_all": {}}}
    assert _http().post(f"{secured.url}/{store}/_refresh", auth=admin).status_code == 200
    mine = _http().post(f"{secured.url}/{store}/_search", json=read, auth=service)
    assert mine.status_code == 200 and mine.json()["hits"]["total"]["value"] >= 5
    for user in ("reader-index", "reader-ab"):  # directly, and through the sidecar
        _forbidden_to(user, _http().post(f"{secured.url}/{store}/_search", json=read,
                                         auth=_as(secured, user)))
    with BackgroundServer(config, sidecar_models) as server:
        _forbidden_to("reader-ab", _http().post(f"{server.url}/{store}/_search", json=read,
                                                auth=_as(secured, "reader-ab")))


def test_a_store_the_engine_refuses_costs_only_speed(secured: LocalNode, sidecar: str,
                                                     sidecar_models: Models) -> None:
    """The module's sidecar has no service identity: the store is read anonymously, which
    the engine refuses; the search is refined all the same."""
    sidecar_models.labeler("default").clear_cache()  # type: ignore[attr-defined]
    refined = _search(sidecar, INDEX_A, _as(secured, "reader-a"), {"method": "rerank", "k": 5})
    assert refined.status_code == 200, refined.text
    assert refined.json()["ext"]["tour"]["degraded"] is False
    assert _stats(sidecar, secured)["store_failures"]["total"] >= 1
