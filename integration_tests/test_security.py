"""The sidecar in front of a secured OpenSearch: every caller keeps its own identity.

The fixture starts OpenSearch with the Security plugin through the CLI's code path
(`es-tour engine start --security`): `reader-a` may read indices tour-a* only, `reader-ab`
tour-a* and tour-b* (and their settings), `reader-index` tour-a* and their settings;
`reader-app` holds exactly the `read` action group on tour-a* (an application's usual role),
`reader-dls` the same with document-level security (topic biology), `reader-fls` with
field-level security (no `text`). No reader has any cluster permission. The sidecar holds
no credentials of its own unless a test gives it some; the node authenticates a client
certificate too, and takes the sidecar's for the service identity.

Every hop is HTTPS: the clients here and the sidecars trust the node's own CA only, and the
sidecars listen with the certificate that CA signed for them.
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from es_tour.agents import parse
from es_tour.agents._environment import TourStep
from es_tour.bench.semantics import REFINED
from es_tour.cli import app
from es_tour.cluster import LocalNode
from es_tour.cluster._security import FLS_HIDDEN_VECTOR, SIDECAR_DN
from es_tour.datasets import BeirDataset, synthetic_metadata
from es_tour.engines import connect
from es_tour.errors import ConfigError
from es_tour.ingest import ingest
from es_tour.models import DualEncoderLabeler
from es_tour.pipeline import doc_text, store_index
from es_tour.recommended import FRONTIER_20
from es_tour.server import (
    DEGRADED_HEADER,
    PASSTHROUGH_HEADER,
    BackgroundServer,
    Models,
    ServerConfig,
)
from es_tour.server._options import method_names
from es_tour.server._service import VECTORS_UNREADABLE
from es_tour.tls import UpstreamTls
from integration_tests.conftest import (
    LEARNED_POLICY,
    PLUGIN_ZIPS,
    SCIFACT,
    TEST_PORTS,
    background_sidecar,
    remember_scifact,
)
from integration_tests.test_sidecar_semantics import INDEX as SEMANTICS_INDEX
from integration_tests.test_sidecar_semantics import SHAPES as SEMANTICS_SHAPES

# every method runs, the learned agent on the suite's own policy
pytestmark = pytest.mark.usefixtures("learned_policy")

SECURED_PORT = TEST_PORTS["opensearch"] + 30
INDEX_A, INDEX_B = "tour-a-scifact", "tour-b-scifact"
# An application's index: SciFact's first docs with a year and a topic, TOUR on with the
# recommended settings (hybrid-tour), at the module's small sizes; and an alias of A.
APP, ALIAS_A = "tour-a-app", "tour-a-alias"
DLS_TOPIC = "biology"  # what `reader-dls` may see (es_tour.cluster._security.DLS_QUERY)
DOCS = 120
QUERY = "vitamin D deficiency"
SMALL = {"k": 5, "max_rounds": 1}  # the labeler runs on a shared CPU
# Options each method needs beyond SMALL (the oracle reads relevance judgements; the
# learned agent runs the suite's own policy, never the model cache's default).
EXTRA: dict[str, dict[str, Any]] = {
    "oracle-agent": {"qrels": {"q": {"4983": 1}}, "queries": {"q": QUERY}},
    "learned-agent": {"policy": LEARNED_POLICY},
}
_ROUNDS = {"tour-hard", "tour-soft", "rm3-agent", "learned-agent", "oracle-agent"}
# the methods that read the stored vectors of the docs they rank or step on
READS_STORED_VECTORS = {"vector-rerank", "rocchio", "tour-hard", "tour-soft",
                        "relevance-feedback", "tour-agent", "hybrid-tour"}


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
    return ServerConfig(**{"upstream": secured.url, "max_k": 50, "upstream_tls": _tls(),
                           "tls_cert": str(cert), "tls_key": str(key), **options})


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalNode]:
    node = _node()
    if node.security.exists() and not node.security.current():
        # made by an older es-tour: its security index lacks today's users and
        # authentication, and loads them only on a first start. A test node: made afresh.
        node.stop()
        shutil.rmtree(node.dir)
        node = _node()
    started = node.pid() is None
    node.start(plugins=[PLUGIN_ZIPS["opensearch"]])
    yield node
    if started:
        node.stop()


@pytest.fixture(scope="module")
async def indices(secured: LocalNode, scifact, sidecar_models: Models) -> None:
    """The first SciFact docs in A (TOUR on by its settings), in B and in APP (with their
    topics; TOUR on by the recommended settings), made by the admin; ALIAS_A names A."""
    user, password = secured.credentials("admin")  # type: ignore[misc]
    async with connect("opensearch", secured.url, _tls(), (user, password)) as admin:
        for name in (INDEX_A, INDEX_B, APP):
            await ingest(admin, scifact, name, sidecar_models.encoder, max_docs=DOCS, replace=True,
                         reuse_embeddings=False, show_progress=False, metadata=name == APP)
    remember_scifact(sidecar_models, scifact, INDEX_A, INDEX_B, APP)
    response = _http().put(f"{secured.url}/{INDEX_A}/_settings", auth=(user, password),
                         json={"index": {"tour": {"enabled": True, "method": "tour-hard",
                                                  **SMALL}}})
    assert response.status_code == 200, response.text
    recommended = {**FRONTIER_20, "index.tour.k": SMALL["k"], "index.tour.budget": 10}
    response = _http().put(f"{secured.url}/{APP}/_settings", auth=(user, password),
                           json=recommended)
    assert response.status_code == 200, response.text
    response = _http().post(f"{secured.url}/_aliases", auth=(user, password), json={
        "actions": [{"add": {"index": INDEX_A, "alias": ALIAS_A}}]})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def sidecar(secured: LocalNode, indices: None, sidecar_models: Models) -> Iterator[str]:
    with background_sidecar(_config(secured), sidecar_models) as server:
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
    with background_sidecar(_config(secured), sidecar_models) as server:
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
        with background_sidecar(config, sidecar_models) as server:
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
    with background_sidecar(ServerConfig(upstream=secured.url), sidecar_models) as unverified:
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


def _empty_store(secured: LocalNode, models: Models) -> str:
    """The default labeler's store index, deleted, and the labeler's own cache emptied: the
    next refined search embeds and stores its docs afresh."""
    labeler = models.labeler("default")
    assert isinstance(labeler, DualEncoderLabeler)
    store = store_index(labeler)
    _http().delete(f"{secured.url}/{store}", auth=_as(secured, "admin"))
    labeler.clear_cache()
    return store


def test_the_vector_store_is_the_service_identitys_alone(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """A caller with index permissions only gets a refined search whose doc vectors the
    sidecar stores as its service user; no caller may read the store itself."""
    store, admin = _empty_store(secured, sidecar_models), _as(secured, "admin")
    service = _as(secured, "es-tour-service")
    config = _config(secured, service_credentials=":".join(service))
    with background_sidecar(config, sidecar_models) as server:
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
    with background_sidecar(config, sidecar_models) as server:
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


# --- Least privilege, document- and field-level security, identity on the wire ---------

HIGHLIGHT = {"fields": {"title": {}, "text": {}}}
# request shapes an application sends, beyond a plain query
SHAPES: dict[str, dict[str, Any]] = {
    "bool + filter": {"query": {"bool": {
        "must": [{"multi_match": {"query": QUERY, "fields": ["title", "text"]}}],
        "filter": [{"range": {"year": {"gte": 2005}}}]}}},
    "aggs + highlight": {"aggs": {"topics": {"terms": {"field": "topic"}}},
                         "highlight": HIGHLIGHT},
    "page 2": {"from": 5, "size": 5},
}


def _app_search(url: str, auth: tuple[str, str] | None, tour: dict[str, Any] | None = None,
                **body: Any) -> httpx.Response:
    """A search of APP as an application writes it: its free text over title and text."""
    request: dict[str, Any] = {
        "query": {"multi_match": {"query": QUERY, "fields": ["title", "text"]}}, "size": 5,
        **body}
    if tour is not None:
        request["ext"] = {"tour": tour}
    return _http().post(f"{url}/{APP}/_search", json=request, auth=auth)


def _service(secured: LocalNode) -> dict[str, str]:
    return {"service_credentials": ":".join(_as(secured, "es-tour-service"))}


def _hit_ids(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [hit["_id"] for hit in answer.json()["hits"]["hits"]]


def _strings(value: Any) -> Iterator[str]:
    """Every string value in a JSON value (keys aside)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@functools.cache
def _app_docs() -> dict[str, Any]:
    """APP's docs: id -> the BEIR doc."""
    return {doc.id: doc for doc in list(BeirDataset(SCIFACT).corpus())[:DOCS]}


def _docs_named(answer: httpx.Response) -> set[str]:
    """The docs an answer names: its hits, and any doc id anywhere in its trace."""
    trace = answer.json().get("ext", {}).get("tour", {})
    return set(_hit_ids(answer)) | {text for text in _strings(trace) if text in _app_docs()}


@pytest.mark.parametrize("service", [False, True], ids=["own-credentials", "service-identity"])
def test_the_application_user_gets_the_engines_status_first_and_through_every_method(
        secured: LocalNode, indices: None, sidecar_models: Models, service: bool) -> None:
    """`reader-app` holds `read` on tour-a* and nothing else: not the index's settings, no
    cluster permission, so no mget, multi term vectors or analyze. Through a fresh sidecar,
    its first search and every method's get the engine's 200, never a 403: without a service
    identity its search passes through (it may not read `index.tour.*`), with one it is
    refined by the index's recommended method."""
    app = _as(secured, "reader-app")
    refused = {"GET /": None, f"GET /{APP}/_settings": None,  # what the engine refuses it
               f"POST /{APP}/_mget": {"ids": ["x"]}, f"POST /{APP}/_mtermvectors": {"ids": ["x"]},
               f"POST /{APP}/_analyze": {"text": QUERY, "field": "text"}}
    for call, body in refused.items():
        method, path = call.split(" ")
        answer = _http().request(method, f"{secured.url}{path}", json=body, auth=app)
        assert answer.status_code == 403, (call, answer.text)
    direct = _app_search(secured.url, app)
    config = _config(secured, **(_service(secured) if service else {}))
    with background_sidecar(config, sidecar_models) as server:
        first = _app_search(server.url, app)
        assert first.status_code == 200, first.text
        if service:
            assert first.json()["ext"]["tour"]["method"] == "hybrid-tour"
        else:  # the engine's own answer
            assert "ext" not in first.json() and _hit_ids(first) == _hit_ids(direct)
        for name, shape in SHAPES.items():
            answer = _app_search(server.url, app, **shape)
            assert answer.status_code == 200, (name, answer.text)
            assert ("ext" in answer.json()) == service, name
            assert answer.json()["hits"]["hits"], name
        for method in method_names():
            answer = _app_search(server.url, app, _options(method), highlight=HIGHLIGHT)
            assert answer.status_code == 200, (method, answer.text)
            assert answer.json()["ext"]["tour"]["method"] == method
            assert answer.json()["hits"]["hits"], method


def test_a_dls_user_sees_no_doc_outside_its_topic_through_any_method(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """`reader-dls` sees the biology docs only: no other doc in any method's hits, on page 1
    or 2, in a highlight or anywhere in the trace. The same searches as `reader-app` name
    docs of other topics."""
    biology = {doc_id for doc_id in _app_docs()
               if synthetic_metadata(doc_id)["topic"] == DLS_TOPIC}
    dls, app = _as(secured, "reader-dls"), _as(secured, "reader-app")
    others = set()
    with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
        first = _app_search(server.url, dls, highlight=HIGHLIGHT)  # by the index's settings
        assert first.json()["ext"]["tour"]["method"] == "hybrid-tour"
        assert _docs_named(first) and _docs_named(first) <= biology
        for method in method_names():
            for page in (0, 5):
                mine = _app_search(server.url, dls, _options(method), highlight=HIGHLIGHT,
                                   **{"from": page})
                named = _docs_named(mine)
                # a page the engine itself shows empty (bm25 answers as the engine does)
                assert named or not _hit_ids(_app_search(secured.url, dls, highlight=HIGHLIGHT,
                                                         **{"from": page})), (method, page)
                assert named <= biology, (method, page, sorted(named - biology))
                highlighted = [hit for hit in mine.json()["hits"]["hits"] if "highlight" in hit]
                assert {hit["_id"] for hit in highlighted} <= biology
                others |= _docs_named(_app_search(server.url, app, _options(method),
                                                  highlight=HIGHLIGHT, **{"from": page}))
    assert others - biology  # without DLS these searches show other topics


@functools.cache
def _hidden_terms(url: str, admin: tuple[str, str]) -> frozenset[str]:
    """The terms of APP's `text` that none of its titles, nor the query, holds, as the index
    analyses them: what a trace could only have learnt from the field FLS hides."""
    def terms(texts: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(texts), 10):  # the engine's token limit per call
            answer = _http().post(f"{url}/{APP}/_analyze", auth=admin,
                                  json={"field": "text", "text": texts[start:start + 10]})
            assert answer.status_code == 200, answer.text
            found |= {token["token"] for token in answer.json()["tokens"]}
        return found

    docs = _app_docs().values()
    return frozenset(terms([doc.text for doc in docs])
                     - terms([doc.title for doc in docs] + [QUERY, "title text"]))


# where a trace writes query text: the agents' queries (Lucene and compiled), and the
# refinements they weighed and chose
QUERY_KEYS = frozenset({"lucene", "query", "dq", "chosen"})


def _query_terms(value: Any, under: str = "") -> set[str]:
    """The terms of the query text anywhere in a trace, read as the refinement grammar
    parses it: q0's words, lower-cased, and each refinement's term, its operator and boost
    apart (`+mice` and `mice^4` are the term `mice`). TOUR's own action names no term."""
    if isinstance(value, str):
        if under not in QUERY_KEYS or value == TourStep().render():
            return set()
        query = parse(value)
        return {*query.text.lower().split(), *(refinement.term for refinement in query.refinements)}
    if isinstance(value, dict):
        return set().union(*(_query_terms(item, key) for key, item in value.items()))
    if isinstance(value, list):
        return set().union(*(_query_terms(item, under) for item in value))
    return set()


def _trace_terms(answer: httpx.Response) -> set[str]:
    """The query terms of an answer's trace."""
    return _query_terms(answer.json().get("ext", {}).get("tour", {}))


def _hidden_sentences() -> list[str]:
    """Sentences of APP's texts, 30 characters or more, that no title holds."""
    docs = _app_docs().values()
    titles = " ".join(doc.title for doc in docs)
    return [sentence.strip() for doc in docs for sentence in doc.text.split(". ")
            if len(sentence.strip()) >= 30 and sentence.strip() not in titles]


def test_an_fls_user_never_gets_the_hidden_field_and_is_labelled_from_what_it_sees(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """`reader-fls` may not see `text`: no method gives it back in `_source`, a highlight or
    the trace (not even as the terms an agent adds to its query), while `reader-app` gets it
    from the same searches. And it is labelled from its titles: the labeler (and the vector
    store) hold vectors of the full texts, which `reader-app`'s searches used, yet none is
    read for `reader-fls`."""
    fls, app = _as(secured, "reader-fls"), _as(secured, "reader-app")
    hidden = _hidden_terms(secured.url, _as(secured, "admin"))
    sentences = _hidden_sentences()
    app_saw_text = app_saw_terms = False
    with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
        for method in method_names():
            theirs = _app_search(server.url, app, _options(method), highlight=HIGHLIGHT)
            their_hits = theirs.json()["hits"]["hits"]
            app_saw_text |= any("text" in hit["_source"] for hit in their_hits) and any(
                "text" in hit.get("highlight", {}) for hit in their_hits)
            app_saw_terms |= bool(_trace_terms(theirs) & hidden)
            mine = _app_search(server.url, fls, _options(method), highlight=HIGHLIGHT)
            hits = mine.json()["hits"]["hits"]
            assert mine.status_code == 200 and hits, (method, mine.text)
            for hit in hits:
                assert "text" not in hit["_source"] and "text" not in hit.get("highlight", {})
            assert not _trace_terms(mine) & hidden, (method, sorted(_trace_terms(mine) & hidden))
            trace = json.dumps(mine.json()["ext"]["tour"])
            assert not [text for text in sentences if text in trace], method
        labelled = _app_search(server.url, fls, {"method": "rerank", "k": 5})
    assert app_saw_text and app_saw_terms  # the same searches show `text` to reader-app
    labeler, docs = sidecar_models.labeler("default"), _app_docs()
    traced = [hit for hit in labelled.json()["ext"]["tour"]["hits"] if hit["label"] is not None]
    assert traced
    fields = ("title", "text")
    for hit in traced:  # scored afresh under another index name: no cached vector is read
        doc = docs[hit["_id"]]
        seen, full = labeler.score(QUERY, [
            (doc.id, doc_text({"title": doc.title}, fields)),
            (doc.id + "-full", doc_text({"title": doc.title, "text": doc.text}, fields))],
            "fls-check")
        assert hit["label"] == pytest.approx(float(seen), abs=1e-6)
        assert abs(float(full) - float(seen)) > 1e-4


def test_the_sidecars_client_certificate_is_shown_on_its_own_calls_only(
        secured: LocalNode, indices: None, sidecar_models: Models, scifact) -> None:
    """The node authenticates a client certificate (before basic credentials), and takes
    the sidecar's for the service identity. A sidecar holding it shows it on its own calls
    (the vector store, read and written with no service credentials but the certificate)
    and on no caller's: an anonymous caller gets the engine's 401, a reader is itself.
    With `client_cert_for_callers`, the engine takes every caller for the sidecar."""
    cert, key = secured.security.sidecar_cert
    holding = UpstreamTls(ca_certs=secured.ca_certs, client_cert=str(cert), client_key=str(key))
    app, whoami = _as(secured, "reader-app"), "/_plugins/_security/authinfo"
    assert _http().get(f"{secured.url}{whoami}").status_code == 401  # the engine's answer
    _empty_store(secured, sidecar_models)  # so the refined searches below write to it
    try:
        with background_sidecar(_config(secured, upstream_tls=holding), sidecar_models) as server:
            for request in (lambda: _http().get(f"{server.url}{whoami}"),
                            lambda: _search(server.url, INDEX_A, None),  # type: ignore[arg-type]
                            lambda: _app_search(server.url, None, {"method": "knn"})):
                anonymous = request()
                assert anonymous.status_code == 401, anonymous.text
            me = _http().get(f"{server.url}{whoami}", auth=app)
            assert me.status_code == 200 and me.json()["user_name"] == "reader-app"
            refined = _app_search(server.url, app, {"method": "rerank", "k": 5})
            assert refined.status_code == 200, refined.text
            assert refined.json()["ext"]["tour"]["method"] == "rerank"
            for _ in range(100):  # the writer flushes every second
                if _stats(server.url, secured)["store_docs_written"]["total"] >= 5:
                    break
                time.sleep(0.1)
            counts = _stats(server.url, secured)
        assert counts["store_docs_written"]["total"] >= 5  # as the sidecar, by its certificate
        assert counts["store_failures"]["total"] == 0
        told = _config(secured, upstream_tls=holding, client_cert_for_callers=True)
        with background_sidecar(told, sidecar_models) as server:
            for auth in (None, app):  # every caller is the sidecar to the engine
                taken = _http().get(f"{server.url}{whoami}", auth=auth)
                assert taken.status_code == 200 and taken.json()["user_name"] == SIDECAR_DN
    finally:
        remember_scifact(sidecar_models, scifact, INDEX_A, INDEX_B, APP)


def test_the_store_is_hidden_and_an_alias_shares_its_indexs_records(
        secured: LocalNode, indices: None, sidecar_models: Models, scifact) -> None:
    """The store is a hidden index (no wildcard names it), and its records name the
    concrete index a hit came from: a search through an alias stores what a search of
    its index then reads."""
    store, admin = _empty_store(secured, sidecar_models), _as(secured, "admin")
    reader = _as(secured, "reader-index")
    tour = {"method": "rerank", "k": 5}
    try:
        with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
            through_alias = _search(server.url, ALIAS_A, reader, tour)
            assert through_alias.status_code == 200, through_alias.text
            for _ in range(100):
                if _stats(server.url, secured)["store_docs_written"]["total"] >= 5:
                    break
                time.sleep(0.1)
        assert _http().post(f"{secured.url}/{store}/_refresh", auth=admin).status_code == 200
        settings = _http().get(f"{secured.url}/{store}/_settings/index.hidden", auth=admin,
                               params={"flat_settings": "true"})
        assert settings.json()[store]["settings"]["index.hidden"] == "true"
        records = _http().post(f"{secured.url}/{store}/_search", auth=admin,
                               json={"size": 100, "_source": ["index"]}).json()["hits"]
        assert records["total"]["value"] >= 5
        assert {hit["_source"]["index"] for hit in records["hits"]} == {INDEX_A}
        wildcard = _http().post(f"{secured.url}/es-tour-vectors-*/_search", auth=admin, json={})
        assert wildcard.status_code == 200 and wildcard.json()["hits"]["total"]["value"] == 0
        # a new sidecar, say: the index's own search reads the records
        sidecar_models.labeler("default").clear_cache()
        with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
            direct = _search(server.url, INDEX_A, reader, tour)
            assert direct.status_code == 200, direct.text
            counts = _stats(server.url, secured)
        assert counts["store_docs_found"]["total"] >= 5
        assert counts["store_docs_found"]["total"] == counts["store_docs_asked"]["total"]
    finally:
        remember_scifact(sidecar_models, scifact, INDEX_A, INDEX_B, APP)


def test_the_application_user_gets_the_engines_status_on_every_semantics_shape(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """Every request shape of the semantics suite (test_sidecar_semantics), sent by
    `reader-app` to APP through a sidecar with a service identity and to the engine: the
    same status each time, and those the suite refines are refined for this user too."""
    app = _as(secured, "reader-app")
    with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
        for shape in SEMANTICS_SHAPES:
            answers = [_http().request("GET" if shape.body is None else "POST",
                                       f"{url}/{APP}/_search", params=shape.params,
                                       json=shape.body, auth=app)
                       for url in (secured.url, server.url)]
            direct, ours = answers
            assert ours.status_code == direct.status_code, (shape.name, ours.text[:300])
            refined = "ext" in ours.json()
            if shape.verdict == REFINED and shape.target == SEMANTICS_INDEX \
                    and direct.status_code == 200:
                assert refined, (shape.name, ours.headers.get(PASSTHROUGH_HEADER))


def test_an_fls_user_who_may_not_see_the_vector_gets_none_and_the_engines_answer(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """`reader-fls-vector` may not see `embedding`. The plugin's `vector` script reads it
    from Lucene, below `_source` filtering, yet gives that caller none (and `reader-app`
    its vector). Every method answers it 200 without the field; one that reads stored
    vectors answers with the engine's own hits for its request, marked degraded."""
    hidden, app = _as(secured, "reader-fls-vector"), _as(secured, "reader-app")
    script = {"script_fields": {"v": {"script": {"lang": "tour", "source": "vector",
                                                 "params": {"f": FLS_HIDDEN_VECTOR}}}}}
    read = {}
    for who in (app, hidden):
        answer = _app_search(secured.url, who, **script)
        assert answer.status_code == 200, answer.text
        read[who] = [hit["fields"]["v"] for hit in answer.json()["hits"]["hits"]]
    assert read[app] and all(value != [None] for value in read[app])
    assert read[hidden] and all(value == [None] for value in read[hidden])
    engines = [hit["_id"] for hit in _app_search(secured.url, hidden).json()["hits"]["hits"]]
    with background_sidecar(_config(secured, **_service(secured)), sidecar_models) as server:
        for method in method_names():
            mine = _app_search(server.url, hidden, _options(method))
            assert mine.status_code == 200, (method, mine.text)
            hits = mine.json()["hits"]["hits"]
            assert hits and not any(FLS_HIDDEN_VECTOR in hit["_source"] for hit in hits)
            if method in READS_STORED_VECTORS:
                assert mine.headers[DEGRADED_HEADER] == VECTORS_UNREADABLE, method
                assert mine.json()["ext"]["tour"]["degraded"] is True
                assert [hit["_id"] for hit in hits] == engines, method
        # the index's own method (the recommended hybrid-tour) too, refined for reader-app
        mine, theirs = _app_search(server.url, hidden), _app_search(server.url, app)
        assert [hit["_id"] for hit in mine.json()["hits"]["hits"]] == engines
        assert DEGRADED_HEADER not in theirs.headers and theirs.json()["ext"]["tour"]["rounds"]


def test_a_callers_docs_are_read_ahead_as_that_caller_sees_them(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """The doc cache reads each caller's docs of APP ahead as that caller: `reader-dls`'s
    read holds its topic's docs alone, `reader-fls`'s no `text`. Searches that then label
    from what was read fetch nothing, and show neither caller what it may not see."""
    biology = {doc_id for doc_id in _app_docs()
               if synthetic_metadata(doc_id)["topic"] == DLS_TOPIC}
    config = replace(_config(secured, **_service(secured)), workers=1)
    queries = ["insulin resistance in obese mice", "tumour suppressor genes", "vitamin D"]

    def search(server: BackgroundServer, user: str, text: str) -> httpx.Response:
        answer = _app_search(server.url, _as(secured, user),
                             query={"multi_match": {"query": text, "fields": ["title", "text"]}},
                             _source=True, highlight=HIGHLIGHT)
        tour = answer.json().get("ext", {}).get("tour", {})
        assert answer.status_code == 200 and tour.get("degraded") is False, answer.text
        return answer

    def read_until(server: BackgroundServer, docs: int) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while (stats := _stats(server.url, secured))["doc_cache_read_ahead"]["total"] < docs:
            assert time.monotonic() < deadline, stats["doc_cache_read_ahead"]
            time.sleep(0.2)
        return stats

    with BackgroundServer(config, sidecar_models) as server:
        search(server, "reader-dls", QUERY)
        stats = read_until(server, len(biology))
        assert stats["doc_cache_read_ahead"]["total"] == len(biology)  # its docs alone
        for text in queries:
            named = _docs_named(search(server, "reader-dls", text))
            assert named and named <= biology, sorted(named - biology)
        # every doc its later searches labelled came from its read
        assert _stats(server.url, secured)["doc_cache_misses"] == stats["doc_cache_misses"]
        search(server, "reader-fls", QUERY)
        stats = read_until(server, len(biology) + DOCS)
        assert stats["doc_cache_read_ahead"]["total"] == len(biology) + DOCS
        for text in queries:
            answer = search(server, "reader-fls", text)
            for hit in answer.json()["hits"]["hits"]:
                assert "text" not in hit["_source"] and "text" not in hit.get("highlight", {})
            assert not [s for s in _hidden_sentences() if s in json.dumps(answer.json())]
        assert _stats(server.url, secured)["doc_cache_misses"] == stats["doc_cache_misses"]


def test_a_kept_ranking_serves_later_pages_to_its_own_caller_alone(
        secured: LocalNode, indices: None, sidecar_models: Models) -> None:
    """`reader-dls`'s next page is cut from the ranking its first page made (no round:
    no pair labelled), with its topic's docs alone; `reader-app`'s same search runs rounds
    of its own; `reader-fls`'s later page, cut from its own ranking, shows no `text`."""
    biology = {doc_id for doc_id in _app_docs()
               if synthetic_metadata(doc_id)["topic"] == DLS_TOPIC}
    config = replace(_config(secured, **_service(secured)), workers=1)

    def page(server: BackgroundServer, user: str, start: int) -> dict[str, Any]:
        answer = _app_search(server.url, _as(secured, user), _source=True,
                             **{"from": start})
        assert answer.status_code == 200, answer.text
        assert answer.json()["ext"]["tour"]["degraded"] is False
        return answer.json()

    with BackgroundServer(config, sidecar_models) as server:
        page(server, "reader-dls", 0)
        later = page(server, "reader-dls", 5)
        tour = later["ext"]["tour"]
        assert tour["ranking_reused"] is True and tour["pairs_scored"] == 0
        shown = {hit["_id"] for hit in later["hits"]["hits"]}
        assert shown and shown <= biology, sorted(shown - biology)
        theirs = page(server, "reader-app", 5)["ext"]["tour"]
        assert theirs["ranking_reused"] is False and theirs["pairs_scored"] > 0
        page(server, "reader-fls", 0)
        fls = page(server, "reader-fls", 5)
        assert fls["ext"]["tour"]["ranking_reused"] is True
        for hit in fls["hits"]["hits"]:
            assert "text" not in hit["_source"]
        assert not [s for s in _hidden_sentences() if s in json.dumps(fls)]
