"""The raw HTTP side: requests proxied verbatim, and `index.tour.*` settings with a short TTL."""

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


class Upstream:
    """One httpx connection pool to the engine."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.engine = config.engine  # detected from the first response when None
        self._client = httpx.AsyncClient(
            base_url=config.base_url,
            timeout=httpx.Timeout(config.upstream_timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=config.max_connections,
                                max_keepalive_connections=config.max_connections),
        )
        # (caller, index) -> (expiry, settings), least recently used first
        self._settings: OrderedDict[tuple[str, str], tuple[float, dict[str, Any] | None]] = (
            OrderedDict())
        self._settings_auth = (tuple(config.settings_credentials.split(":", 1))
                               if config.settings_credentials else None)

    async def close(self) -> None:
        await self._client.aclose()

    async def forward(self, request: Request, body: bytes | None = None,
                      reason: str | None = None) -> Response:
        """The request sent upstream as it came (its body streamed unless already read);
        the answer streamed back with its status and headers."""
        url = httpx.URL(path=request.scope["raw_path"].decode("latin-1"))
        if request.scope["query_string"]:  # verbatim, as the client encoded it
            url = url.copy_with(query=request.scope["query_string"])
        headers = [(k, v) for k, v in request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP]
        content: bytes | AsyncIterator[bytes] = body if body is not None else request.stream()
        upstream_request = self._client.build_request(request.method, url, headers=headers,
                                                      content=content)
        try:
            response = await self._client.send(upstream_request, stream=True)
        except httpx.TransportError as exc:
            raise UpstreamError(f"upstream {self.config.base_url} unreachable: "
                                f"{type(exc).__name__}: {exc}") from exc
        self._detect(response)
        out_headers = [(k, v) for k, v in response.headers.raw
                       if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if reason is not None:
            out_headers.append((PASSTHROUGH_HEADER.encode(), reason.encode("latin-1", "replace")))
        streamed = StreamingResponse(response.aiter_raw(), status_code=response.status_code,
                                     background=BackgroundTask(response.aclose))
        streamed.raw_headers = out_headers
        return streamed

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
        try:
            response = await self._client.get(
                f"/{httpx.URL(path=index).raw_path.decode()}/_settings/index.tour.*",
                params={"flat_settings": "true"}, headers=caller,
                auth=self._settings_auth or httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as exc:
            raise UpstreamError(f"upstream {self.config.base_url} unreachable: "
                                f"{type(exc).__name__}: {exc}") from exc
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
            try:
                response = await self._client.get("/", headers=identity(headers))
            except httpx.TransportError as exc:
                raise UpstreamError(f"upstream {self.config.base_url} unreachable: {exc}") from exc
            self._detect(response)
            if self.engine is None:
                raise EngineError(response.status_code, _body(response))
        return self.engine

    def _detect(self, response: httpx.Response) -> None:
        """Elasticsearch names itself on every answer; an OpenSearch answer says so only
        by succeeding without the header (a 401 from either may lack it)."""
        if self.engine is None:
            if response.headers.get("x-elastic-product") == "Elasticsearch":
                self.engine = "elasticsearch"
            elif response.is_success:
                self.engine = "opensearch"


def _fingerprint(caller: Mapping[str, str]) -> str:
    """A digest of the caller's identity headers: cache keys hold no secrets."""
    return hashlib.sha256(repr(sorted(caller.items())).encode()).hexdigest()


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text
