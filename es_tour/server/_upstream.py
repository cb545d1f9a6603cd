"""The raw HTTP side: requests proxied verbatim, and `index.tour.*` settings with a short TTL.

With several upstream nodes (one cluster), requests go to them in turn; a request no node
has received yet moves on to the next node, and so does an idempotent one (a search, or any
GET / HEAD / OPTIONS) whose node died while answering it.
"""

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
BUFFERED_BYTES = 256 * 1024  # answers up to this size (by Content-Length) are not streamed
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTed only because they carry a body; they change nothing, so a retry is harmless
READ_ONLY_ENDPOINTS = ("/_search", "/_msearch", "/_count", "/_mget")
# RFC 9110 §7.6.1: connection-specific headers are not forwarded; Host is the upstream's.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
                        "host"})


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
        self._settings: dict[str, tuple[float, dict[str, Any] | None]] = {}

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
        self._detect(response.headers)
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
        """The index's flat `index.tour.*` settings, cached `settings_ttl_s`; None when the
        name is not exactly one index the caller may read (the request then passes through)."""
        now = time.monotonic()
        cached = self._settings.get(index)
        if cached is not None and cached[0] > now:
            return cached[1]
        forwarded = [(k.encode(), v.encode()) for k, v in headers.items()
                     if k.lower() == "authorization"]
        path = f"/{httpx.URL(path=index).raw_path.decode()}/_settings/index.tour.*"
        response = await self._send("GET", f"{path}?flat_settings=true".encode(), forwarded,
                                    b"", idempotent=True)
        await response.aread()
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
            response = await self._send("GET", b"/", [], b"", idempotent=True)
            await response.aclose()
            self._detect(response.headers)
        assert self.engine is not None
        return self.engine

    async def _send(self, method: str, raw_path: bytes, headers: list[tuple[bytes, bytes]],
                    content: bytes | AsyncIterator[bytes], idempotent: bool) -> httpx.Response:
        """The response (streamed) of the first node that answers; 502 when none does."""
        failure: httpx.TransportError | None = None
        for base in self.hosts.order():
            url = httpx.URL(base)
            url = url.copy_with(raw_path=url.raw_path.rstrip(b"/") + raw_path)
            request = self._client.build_request(method, url, headers=headers, content=content)
            try:
                return await self._client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failure = exc  # nothing reached the node: any request may go elsewhere
            except httpx.TransportError as exc:
                if not idempotent:
                    raise _unreachable(base, exc) from exc
                failure = exc
            self.hosts.failed(base)
        assert failure is not None
        raise _unreachable(", ".join(self.hosts.urls), failure) from failure

    def _detect(self, headers: httpx.Headers) -> None:
        if self.engine is None:
            product = headers.get("x-elastic-product")
            self.engine = "elasticsearch" if product == "Elasticsearch" else "opensearch"


def _unreachable(where: str, exc: httpx.TransportError) -> UpstreamError:
    return UpstreamError(f"upstream {where} unreachable: {type(exc).__name__}: {exc}")
