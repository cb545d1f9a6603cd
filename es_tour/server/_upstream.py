"""The raw HTTP side: requests proxied verbatim, and `index.tour.*` settings with a short TTL.

With several upstream nodes (one cluster), requests go to them in turn; a request no node
has received yet moves on to the next node, and so does an idempotent one (a search, or any
GET / HEAD / OPTIONS) whose node died while answering it.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from es_tour.errors import EngineError, UpstreamError
from es_tour.server._config import ServerConfig

PASSTHROUGH_HEADER = "X-Es-Tour-Passthrough"
BUFFERED_BYTES = 256 * 1024  # answers up to this size (by Content-Length) are not streamed
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTed only because they carry a body; they change nothing, so a retry is harmless
READ_ONLY_ENDPOINTS = ("/_search", "/_msearch", "/_count", "/_mget")
# RFC 9110 §7.6.1: connection-specific headers are not forwarded; Host is the upstream's.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
                        "host"})
# Who the caller is, to the engine: basic / bearer / API-key Authorization, session cookies,
# run-as (Elasticsearch), tenant and proxy-authentication headers (OpenSearch Security).
IDENTITY_HEADERS = ("authorization", "cookie", "es-security-runas-user", "securitytenant",
                    "x-proxy-user", "x-proxy-roles", "x-forwarded-for")
# Settings answers that hold for this caller until they expire: the index's settings, or
# (400, 403, 404) no single index this caller may read, which passes the search through.
_SETTLED = frozenset({200, 400, 403, 404})


def identity(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's identity headers, to send on every engine call made on its behalf."""
    return {name: headers[name] for name in IDENTITY_HEADERS if name in headers}


class Hosts:
    """The upstream nodes, taken in turn; a node that failed goes last for `retry_after_s`."""

    def __init__(self, urls: tuple[str, ...], retry_after_s: float = 5.0):
        self.urls = urls
        self._retry_after_s = retry_after_s
        self._down_until = dict.fromkeys(urls, 0.0)
        self._turn = 0

    def order(self) -> list[str]:
        """Every node once: those up first, starting from the next one's turn."""
        if len(self.urls) == 1:
            return list(self.urls)
        start, now = self._turn, time.monotonic()
        self._turn = (self._turn + 1) % len(self.urls)
        rotated = self.urls[start:] + self.urls[:start]
        return sorted(rotated, key=lambda url: self._down_until[url] > now)

    def failed(self, url: str) -> None:
        self._down_until[url] = time.monotonic() + self._retry_after_s


class Upstream:
    """One httpx connection pool to the engine's nodes."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.engine = config.engine  # detected from the first response when None
        self.hosts = Hosts(config.upstreams)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.upstream_timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=config.max_connections,
                                max_keepalive_connections=config.max_connections),
        )
        # (caller, index) -> (expiry, settings), least recently used first
        self._settings: OrderedDict[tuple[str, str], tuple[float, dict[str, Any] | None]] = (
            OrderedDict())
        self._settings_auth: tuple[str, str] | None = None
        if config.settings_credentials:
            user, _, password = config.settings_credentials.partition(":")
            self._settings_auth = (user, password)

    async def close(self) -> None:
        await self._client.aclose()

    async def forward(self, request: Request, body: bytes | None = None,
                      reason: str | None = None) -> Response:
        """The request sent upstream as it came (its body streamed unless already read);
        the answer sent back with its status and headers, streamed when large."""
        raw_path = request.scope["raw_path"]
        if request.scope["query_string"]:  # verbatim, as the client encoded it
            raw_path += b"?" + request.scope["query_string"]
        headers = [(k, v) for k, v in request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if body is None and request.method in SAFE_METHODS:
            body = await request.body()  # small, and a retry on another node needs it again
        content: bytes | AsyncIterator[bytes] = body if body is not None else request.stream()
        idempotent = body is not None and (request.method in SAFE_METHODS or
                                           request.url.path.endswith(READ_ONLY_ENDPOINTS))
        response = await self._send(request.method, raw_path, headers, content, idempotent)
        self._detect(response)
        out_headers = [(k, v) for k, v in response.headers.raw
                       if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if reason is not None:
            out_headers.append((PASSTHROUGH_HEADER.encode(), reason.encode("latin-1", "replace")))
        answer: Response
        if int(response.headers.get("content-length", BUFFERED_BYTES + 1)) <= BUFFERED_BYTES:
            # one write back: a small answer costs less read whole than streamed
            answer = Response(b"".join([chunk async for chunk in response.aiter_raw()]),
                              status_code=response.status_code)
        else:
            answer = StreamingResponse(response.aiter_raw(), status_code=response.status_code,
                                       background=BackgroundTask(response.aclose))
        answer.raw_headers = out_headers
        return answer

    async def tour_settings(self, index: str, headers: Mapping[str, str]) -> dict[str, Any] | None:
        """The index's flat `index.tour.*` settings, cached `settings_ttl_s` per caller; None
        when the name is not exactly one index the caller may read (the search then passes
        through). Read with the caller's credentials, or the sidecar's own when configured.
        Any other answer (401, 429, 5xx) is the engine's error, and is not cached."""
        caller = identity(headers) if self._settings_auth is None else {}
        key = (_fingerprint(caller), index)
        now = time.monotonic()
        cached = self._settings.get(key)
        if cached is not None and cached[0] > now:
            self._settings.move_to_end(key)
            return cached[1]
        path = f"/{httpx.URL(path=index).raw_path.decode()}/_settings/index.tour.*"
        response = await self._send("GET", f"{path}?flat_settings=true".encode(),
                                    _raw(caller), b"", idempotent=True, auth=self._settings_auth)
        await response.aread()
        self._detect(response)
        if response.status_code not in _SETTLED:
            raise EngineError(response.status_code, _body(response))
        settings: dict[str, Any] | None = None
        if response.status_code == 200:
            indices = response.json()
            if len(indices) == 1:
                settings = dict(next(iter(indices.values())).get("settings", {}))
        self._settings[key] = (now + self.config.settings_ttl_s, settings)
        self._settings.move_to_end(key)
        while len(self._settings) > self.config.settings_cache_size:
            self._settings.popitem(last=False)
        return settings

    async def detect_engine(self, headers: Mapping[str, str]) -> str:
        """"elasticsearch" when the upstream sends X-Elastic-Product, else "opensearch";
        asked with the caller's credentials, since a secured engine answers others 401."""
        if self.engine is None:
            response = await self._send("GET", b"/", _raw(identity(headers)), b"",
                                        idempotent=True)
            await response.aread()
            self._detect(response)
            if self.engine is None:
                raise EngineError(response.status_code, _body(response))
        return self.engine

    async def _send(self, method: str, raw_path: bytes, headers: list[tuple[bytes, bytes]],
                    content: bytes | AsyncIterator[bytes], idempotent: bool,
                    auth: tuple[str, str] | None = None) -> httpx.Response:
        """The response (streamed) of the first node that answers; 502 when none does."""
        failure: httpx.TransportError | None = None
        for base in self.hosts.order():
            url = httpx.URL(base)
            url = url.copy_with(raw_path=url.raw_path.rstrip(b"/") + raw_path)
            request = self._client.build_request(method, url, headers=headers, content=content)
            try:
                return await self._client.send(request, stream=True,
                                               auth=auth or httpx.USE_CLIENT_DEFAULT)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failure = exc  # nothing reached the node: any request may go elsewhere
            except httpx.TransportError as exc:
                if not idempotent:
                    raise _unreachable(base, exc) from exc
                failure = exc
            self.hosts.failed(base)
        assert failure is not None
        raise _unreachable(", ".join(self.hosts.urls), failure) from failure

    def _detect(self, response: httpx.Response) -> None:
        """Elasticsearch names itself on every answer; an OpenSearch answer says so only
        by succeeding without the header (a 401 from either may lack it)."""
        if self.engine is None:
            if response.headers.get("x-elastic-product") == "Elasticsearch":
                self.engine = "elasticsearch"
            elif response.is_success:
                self.engine = "opensearch"


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def _fingerprint(caller: Mapping[str, str]) -> str:
    """A digest of the caller's identity headers: cache keys hold no secrets."""
    return hashlib.sha256(repr(sorted(caller.items())).encode()).hexdigest()


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


def _unreachable(where: str, exc: httpx.TransportError) -> UpstreamError:
    return UpstreamError(f"upstream {where} unreachable: {type(exc).__name__}: {exc}")
