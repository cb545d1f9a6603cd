"""Hypothesis against a real sidecar in front of both real engines: request bodies, paths and
`ext.tour` options of every method. Whatever comes in, nothing comes back 5xx, and every
4xx is in the engine's error shape (or is the engine's own answer, byte for byte).

Deterministic (derandomize=True) and bounded: CASES per engine, cheap settings where a
method allows (k <= 5, max_rounds <= 2, the retriever as labeler). The count of cases run
is printed at the end of the module.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from es_tour.cluster import NodeStatus
from es_tour.engines import IndexSpec, connect
from es_tour.server import BackgroundServer, Models, ServerConfig
from es_tour.server._options import method_names

ENGINES = ("opensearch", "elasticsearch")
INDEX = "it-fuzz"
MISSING = "it-fuzz-missing"
DOCS = 40
CASES = {"bodies": 200, "tour": 250, "paths": 100}  # per engine: 1,100 in all
FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RUN: Counter[str] = Counter()  # cases sent, by test and engine
STATUSES: Counter[str] = Counter()  # answers, by status class


@dataclass
class Target:
    engine: str
    sidecar_port: int
    engine_port: int


@pytest.fixture(scope="module")
def fuzz_models() -> Models:
    shared = Models("retriever")
    shared.preload("retriever")
    return shared


@pytest.fixture(scope="module", autouse=True)
def report(pytestconfig: pytest.Config) -> Iterator[None]:
    yield
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nfuzz: {sum(RUN.values())} cases sent; "
              + ", ".join(f"{name} {count}" for name, count in sorted(RUN.items()))
              + "; answers " + ", ".join(f"{k} {v}" for k, v in sorted(STATUSES.items())))


@pytest.fixture(scope="module", params=ENGINES)
async def target(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                 scifact_index: str, fuzz_models: Models) -> AsyncIterator[Target]:
    engine, url = request.param, nodes[request.param].url
    async with connect(engine, url) as adapter:
        hits = await adapter.bool_search(scifact_index, {"match_all": {}}, DOCS)
        await adapter.create_index(IndexSpec(INDEX, dimension=384), replace=True)
        await adapter.bulk_index(INDEX, [{"_id": h.id, **h.source} for h in hits])
        await adapter.refresh(INDEX)
    httpx.delete(f"{url}/{MISSING}")
    config = ServerConfig(upstream=url, labeler="retriever", deadline_ms=5000, max_k=10,
                          max_size=20, max_rounds=3, max_top_k=20, max_body_bytes=64 * 1024)
    with BackgroundServer(config, fuzz_models) as server:
        yield Target(engine, int(urlsplit(server.url).port or 0), int(urlsplit(url).port or 0))


def _send(port: int, method: str, path: bytes, body: bytes | None) -> tuple[int, bytes]:
    """One raw HTTP/1.1 request, the path sent exactly as given (clients would normalise it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        head = [method.encode() + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1",
                b"Connection: close"]
        if body is not None:
            head += [b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + (body or b""))
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        payload = response.read()
        if response.getheader("content-encoding") == "gzip":  # the engine compresses
            payload = gzip.decompress(payload)
        return response.status, payload


def _engine_shaped(payload: bytes, status: int) -> bool:
    """{"error": {"type", "reason", ...}, "status"}: every error of the sidecar's own, and
    most of the engines'."""
    body = _json(payload)
    error = body.get("error") if isinstance(body, dict) else None
    return (isinstance(error, dict) and isinstance(error.get("type"), str)
            and isinstance(error.get("reason"), str) and body.get("status") == status)


def _engine_plain(payload: bytes) -> bool:
    """{"error": "..."}: the engines' own answer when no REST handler takes a path."""
    body = _json(payload)
    return isinstance(body, dict) and isinstance(body.get("error"), str)


def _json(payload: bytes) -> object:
    try:
        return json.loads(payload)
    except ValueError:
        return None


def _check(target: Target, test: str, method: str, path: bytes, body: bytes | None) -> None:
    RUN[f"{test}[{target.engine}]"] += 1
    status, payload = _send(target.sidecar_port, method, path, body)
    STATUSES[f"{status // 100}xx"] += 1
    shown = f"{method} {path!r} {(body or b'')[:300]!r} -> {status} {payload[:400]!r}"
    assert status < 500, shown
    if status >= 400 and method != "HEAD" and not _engine_shaped(payload, status):
        assert _engine_plain(payload) or \
            _send(target.engine_port, method, path, body) == (status, payload), shown


# --- strategies ----------------------------------------------------------------------------

INTERESTING = st.sampled_from([0, -1, 1, 2, 3, 5, 10, 11, 21, 10**30, 2**63, -(2**63), 1e308,
                               -0.0, 0.5, 1.5, 1e-300, 0.999])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | INTERESTING
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8)
OPTION_NAMES = ["k", "max_rounds", "lr", "lambda", "lam", "temperature", "tau", "threshold", "p",
                "momentum", "weight_decay", "k_prime", "alpha", "beta", "gamma", "first_stage",
                "rrf_k", "top_k", "m", "policy", "pseudo_relevant", "qrels", "queries",
                "labeler", "vector_field", "text_fields", "query_text", "timeout_ms", "variant",
                "bogus"]
OPTION_VALUES = (st.integers(-2, 25) | INTERESTING | st.floats(-2, 3)
                 | st.sampled_from(["knn", "bm25", "/etc", "../agent-policy", "default",
                                    "retriever", "", "title", "embedding", "hard"])
                 | st.booleans() | st.none() | JSON)
# a cheap, valid start that the drawn options then change, so every method also really runs
CHEAP = st.fixed_dictionaries({"k": st.integers(1, 5), "max_rounds": st.integers(0, 2),
                               "top_k": st.integers(5, 20), "labeler": st.just("retriever")})
TOUR = st.builds(lambda method, base, drawn, keep: {"method": method,
                                                     **{k: v for k, v in base.items() if keep},
                                                     **drawn},
                 st.sampled_from(method_names()), CHEAP,
                 st.dictionaries(st.sampled_from(OPTION_NAMES), OPTION_VALUES, max_size=3),
                 st.booleans())
SPECIAL_BODIES = st.sampled_from([
    b'{"size": 1e999, "query": {"match": {"text": "q"}}, "ext": {"tour": {}}}',
    b'{"size": ' + b"9" * 5000 + b', "query": {"match": {"text": "q"}}, "ext": {"tour": {}}}',
    b'{"query": {"match": {"text": NaN}}, "ext": {"tour": {}}}',
    b'{"ext": {"tour": {"k": Infinity}}, "query": {"match": {"text": "q"}}}',
    b'{"ext": {"tour": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}",
    b'{"query": {"match": {"text": "' + b"x" * 70_000 + b'"}}, "ext": {"tour": {}}}',
    b'{"knn": {"field": "embedding", "query_vector": [0, 0, 0]}, "ext": {"tour": '
    b'{"query_text": "q"}}}',
    b'{"query": {"knn": {"embedding": {"vector": [1e39], "k": 3}}}, "ext": {"tour": '
    b'{"query_text": "q"}}}',
    b"{not json", b"", b"[]", b'"text"', b"\xff\xfe",
])
BODY_KEYS = ["query", "knn", "size", "from", "_source", "ext", "timeout", "track_total_hits",
             "aggs", "sort", "bogus"]
QUERIES = st.sampled_from([{"match": {"text": "vitamin d"}}, {"match_all": {}},
                           {"multi_match": {"query": "cancer", "fields": ["title", "text"]}},
                           {"match": {"text": {"query": "bone", "operator": "and"}}}]) | JSON
BODIES = st.one_of(
    SPECIAL_BODIES,
    st.binary(max_size=48),
    JSON.map(lambda value: json.dumps(value).encode()),
    st.builds(lambda query, extra, tour: json.dumps(
        {"query": query, **extra, **({"ext": {"tour": tour}} if tour is not None else {})}
    ).encode(), QUERIES, st.dictionaries(st.sampled_from(BODY_KEYS), JSON, max_size=3),
        st.none() | st.just({}) | TOUR),
)
VISIBLE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "#")
SEGMENTS = st.sampled_from(["_search", "_cluster", "health", "_cat", "indices", INDEX, MISSING,
                            "_doc", "_settings", "_mapping", "..", ".", "%2F", "%zz", "%",
                            "_count", "_nodes", "stats", "", "_all"]) | st.text(VISIBLE,
                                                                                max_size=6)
PATHS = st.one_of(st.lists(SEGMENTS, max_size=4).map(lambda parts: "/" + "/".join(parts)),
                  st.text(VISIBLE, max_size=16).map(lambda text: "/" + text))


# --- the fuzz ------------------------------------------------------------------------------

@settings(FUZZ, max_examples=CASES["tour"])
@given(tour=TOUR, size=st.integers(0, 12) | INTERESTING, text=st.text(max_size=24))
def test_ext_tour_options_of_every_method(target: Target, tour: dict, size: object,
                                          text: str) -> None:
    body = {"query": {"match": {"text": text}}, "size": size, "ext": {"tour": tour}}
    _check(target, "tour", "POST", f"/{INDEX}/_search".encode(), json.dumps(body).encode())


@settings(FUZZ, max_examples=CASES["bodies"])
@given(body=BODIES, index=st.sampled_from([INDEX, MISSING, "_all", f"{INDEX},{INDEX}"]))
def test_request_bodies(target: Target, body: bytes, index: str) -> None:
    _check(target, "bodies", "POST", f"/{index}/_search".encode(), body)


@settings(FUZZ, max_examples=CASES["paths"])
@given(path=PATHS, query=st.none() | st.text(VISIBLE, max_size=12))
def test_paths(target: Target, path: str, query: str | None) -> None:
    # GET only: a fuzzed PUT or DELETE could change the test engines
    raw = path + (f"?{query}" if query is not None else "")
    _check(target, "paths", "GET", raw.encode("ascii"), None)


# --- the issue's own cases, each named ------------------------------------------------------

MATCH = {"query": {"match": {"text": "vitamin d"}}}


@pytest.mark.parametrize(("path", "body", "status", "error_type"), [
    (f"/{INDEX}/_search", json.dumps({**MATCH, "ext": {"tour": {"method": "rocchio",
                                                                  "k_prime": 0}}}).encode(),
     400, "illegal_argument_exception"),
    (f"/{INDEX}/_search", b'{"size": 1e999, "query": {"match": {"text": "q"}}, "ext": '
                          b'{"tour": {}}}', 400, "illegal_argument_exception"),
    (f"/{INDEX}/_search", b'{"size": ' + b"7" * 5000 + b', "ext": {"tour": {}}}', 400,
     "illegal_argument_exception"),
    (f"/{MISSING}/_search", json.dumps({**MATCH, "ext": {"tour": {}}}).encode(), 404,
     "index_not_found_exception"),
    ("//_cluster/health", None, 400, "illegal_argument_exception"),
    (f"/{INDEX}/_search", json.dumps({**MATCH, "ext": {"tour": {
        "method": "learned-agent", "policy": "/etc"}}}).encode(), 400,
     "illegal_argument_exception"),
    (f"/{INDEX}/_search", json.dumps({**MATCH, "ext": {"tour": {
        "method": "hybrid-rrf", "rrf_k": -61}}}).encode(), 400, "illegal_argument_exception"),
])
def test_the_inputs_that_gave_500_are_clean_4xx(target: Target, path: str, body: bytes | None,
                                                status: int, error_type: str) -> None:
    got, payload = _send(target.sidecar_port, "POST" if body else "GET", path.encode(), body)
    assert got == status, payload
    assert _engine_shaped(payload, status) and json.loads(payload)["error"]["type"] == error_type
    assert b"/etc" not in payload or b"registry name" in payload  # no path is looked up


def test_ext_tour_on_a_missing_index_is_the_engines_own_404(target: Target) -> None:
    body = json.dumps({**MATCH, "ext": {"tour": {}}}).encode()
    _, via = _send(target.sidecar_port, "POST", f"/{MISSING}/_search".encode(), body)
    _, direct = _send(target.engine_port, "POST", f"/{MISSING}/_search".encode(),
                      json.dumps(MATCH).encode())
    assert json.loads(via) == json.loads(direct)
