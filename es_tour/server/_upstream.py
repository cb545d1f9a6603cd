"""The raw HTTP side: requests proxied verbatim, and `index.tour.*` settings with a short TTL."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from es_tour.errors import UpstreamError
from es_tour.server._config import ServerConfig

PASSTHROUGH_HEADER = "X-Es-Tour-Passthrough"
# RFC 9110 §7.6.1: connection-specific headers are not forwarded; Host is the upstream's.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
                        "host"})


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
        self._settings: dict[str, tuple[float, dict[str, Any] | None]] = {}

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
        self._detect(response.headers)
        out_headers = [(k, v) for k, v in response.headers.raw
                       if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if reason is not None:
            out_headers.append((PASSTHROUGH_HEADER.encode(), reason.encode("latin-1", "replace")))
        streamed = StreamingResponse(response.aiter_raw(), status_code=response.status_code,
                                     background=BackgroundTask(response.aclose))
        streamed.raw_headers = out_headers
        return streamed

    async def tour_settings(self, index: str, headers: Mapping[str, str]) -> dict[str, Any] | None:
        """The index's flat `index.tour.*` settings, cached `settings_ttl_s`; None when the
        name is not exactly one index the caller may read (the request then passes through)."""
        now = time.monotonic()
        cached = self._settings.get(index)
        if cached is not None and cached[0] > now:
            return cached[1]
        forwarded = {k: v for k, v in headers.items() if k.lower() == "authorization"}
        try:
            response = await self._client.get(
                f"/{httpx.URL(path=index).raw_path.decode()}/_settings/index.tour.*",
                params={"flat_settings": "true"}, headers=forwarded)
        except httpx.TransportError as exc:
            raise UpstreamError(f"upstream {self.config.base_url} unreachable: "
                                f"{type(exc).__name__}: {exc}") from exc
        self._detect(response.headers)
        settings: dict[str, Any] | None = None
        if response.status_code == 200:
            indices = response.json()
            if len(indices) == 1:
                settings = dict(next(iter(indices.values())).get("settings", {}))
        self._settings[index] = (now + self.config.settings_ttl_s, settings)
        return settings

    async def detect_engine(self) -> str:
        """"elasticsearch" when the upstream sends X-Elastic-Product, else "opensearch"."""
        if self.engine is None:
            try:
                response = await self._client.get("/")
            except httpx.TransportError as exc:
                raise UpstreamError(f"upstream {self.config.base_url} unreachable: {exc}") from exc
            self._detect(response.headers)
        assert self.engine is not None
        return self.engine

    def _detect(self, headers: httpx.Headers) -> None:
        if self.engine is None:
            product = headers.get("x-elastic-product")
            self.engine = "elasticsearch" if product == "Elasticsearch" else "opensearch"
