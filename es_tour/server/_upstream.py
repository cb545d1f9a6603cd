"""The raw HTTP side: requests proxied verbatim, and `index.tour.*` settings with a short TTL.

With several upstream nodes (one cluster), requests go to them in turn; a request no node
has received yet moves on to the next node, and so does an idempotent one (a search, or any
GET / HEAD / OPTIONS) whose node died while answering it.

Two kinds of call, on two connection pools when the sidecar has a client certificate of its
own: callers' (forwarded requests, and the sidecar's reads made with a caller's identity),
which never show it unless the operator says so (`client_cert_for_callers`), and the
sidecar's own identity's (settings read as the service, the engine's name at startup,
health), which do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from yarl import URL

from es_tour.errors import EngineError, EsTourError, UpstreamError
from es_tour.server._config import ServerConfig
from es_tour.server._request import MsearchItem
from es_tour.tls import uses_https

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized

log = logging.getLogger("es_tour.server")

PASSTHROUGH_HEADER = "X-Es-Tour-Passthrough"
STARTUP_DETECT_S = 5.0  # the longest startup waits for the engine to say what it is
BUFFERED_BYTES = 256 * 1024  # answers up to this size (by Content-Length) are not streamed
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POSTed only because they carry a body; they change nothing, so a retry is harmless
READ_ONLY_ENDPOINTS = ("/_search", "/_msearch", "/_count", "/_mget")
# aiohttp adds none of these by itself: a forwarded request carries the client's own only
# (an Accept-Encoding of ours would bring compressed answers the client never asked for).
NOT_ADDED = ("Accept", "Accept-Encoding", "Content-Type", "User-Agent")
# RFC 9110 §7.6.1: connection-specific headers are not forwarded; Host is the upstream's.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
                        "host"})
# Who the caller is, to the engine: basic / bearer / API-key Authorization, session cookies,
# run-as and a JWT realm's client secret (Elasticsearch), tenant and proxy-authentication
# headers (OpenSearch Security).
IDENTITY_HEADERS = ("authorization", "cookie", "es-security-runas-user",
                    "es-client-authentication", "securitytenant", "x-proxy-user",
                    "x-proxy-roles", "x-forwarded-for")
# Path segments of requests that may change which `index.tour.*` settings a name has.
SETTINGS_WRITES = frozenset({"_settings", "_alias", "_aliases", "_open", "_close"})
# Settings answers that hold for this caller until they expire: the index's settings, or
# (400, 403, 404) no single index this caller may read, which passes the search through.
_SETTLED = frozenset({200, 400, 403, 404})


def identity(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's identity headers, to send on every engine call made on its behalf."""
    return {name: headers[name] for name in IDENTITY_HEADERS if name in headers}


def changes_settings(path: str) -> bool:
    """Whether a successful write to `path` may change an index's settings: an index
    created or deleted, its settings written, an alias moved, an index opened or closed."""
    segments = [segment for segment in path.split("/") if segment]
    if len(segments) == 1:
        return not segments[0].startswith("_") or segments[0] == "_aliases"
    return any(segment in SETTINGS_WRITES for segment in segments)


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


class SettingsEpoch:
    """How many writes to index settings have passed through the sidecar: a count of this
    process's own, or one in shared memory that every worker of `serve --workers` moves
    and reads, so a change made through any worker shows on the next search through any."""

    def __init__(self, shared: Synchronized[int] | None = None):
        self._shared = shared
        self._own = 0

    def now(self) -> int:
        return self._own if self._shared is None else int(self._shared.value)

    def advance(self) -> None:
        if self._shared is None:
            self._own += 1
            return
        with self._shared.get_lock():
            self._shared.value += 1


class Upstream:
    """The engine's nodes, behind one connection pool."""

    def __init__(self, config: ServerConfig, settings_epoch: SettingsEpoch | None = None):
        self.config = config
        self.engine = config.engine  # when None: detected at startup or from an answer
        self.hosts = Hosts(config.upstreams)
        # made inside the event loop: callers' calls, and the sidecar's own when they differ
        self._session: aiohttp.ClientSession | None = None
        self._own_session: aiohttp.ClientSession | None = None
        # (caller, index) -> (expiry, epoch read in, settings), least recently used first
        self._settings: OrderedDict[
            tuple[str, str], tuple[float, int, dict[str, Any] | None]] = OrderedDict()
        self._settings_epoch = settings_epoch or SettingsEpoch()
        # the sidecar's own identity, for the settings lookup, when configured
        self._service_identity = config.service_identity or None
        # made now, so a bad CA or client certificate fails at startup, not on a request
        tls, https = config.upstream_tls, uses_https(config.upstreams)
        self._ssl: ssl.SSLContext | bool = tls.context(for_callers=True) if https else True
        # the sidecar's own calls show its client certificate; callers' do not, unless told
        self._separate_own = https and tls.own_calls_only
        self._own_ssl: ssl.SSLContext | bool = tls.context() if self._separate_own else self._ssl

    def _client(self, own: bool = False) -> aiohttp.ClientSession:
        """A connection pool (aiohttp: a third of httpx's CPU per request): callers', or
        the sidecar's `own` when its client certificate is its own alone. It keeps no
        cookies, which would carry one caller's session to the next."""
        if own and self._separate_own:
            if self._own_session is None:
                self._own_session = self._pool(self._own_ssl)
            return self._own_session
        if self._session is None:
            self._session = self._pool(self._ssl)
        return self._session

    def _pool(self, context: ssl.SSLContext | bool) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.config.max_connections,
                                           limit_per_host=self.config.max_connections,
                                           ssl=context),
            timeout=aiohttp.ClientTimeout(connect=self.config.connect_timeout_s,
                                          sock_read=self.config.upstream_timeout_s),
            cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            skip_auto_headers=NOT_ADDED)

    async def close(self) -> None:
        for session in (self._session, self._own_session):
            if session is not None:
                await session.close()

    async def forward(self, request: Request, body: bytes | None = None,
                      reason: str | None = None) -> Response:
        """The request sent upstream as it came (its body streamed unless already read);
        the answer sent back with its status and headers, streamed when large."""
        raw_path = request.scope["raw_path"]
        if request.scope["query_string"]:  # verbatim, as the client encoded it
            raw_path += b"?" + request.scope["query_string"]
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if body is None and request.method in SAFE_METHODS:
            body = await request.body()  # small, and a retry on another node needs it again
        content: bytes | AsyncIterator[bytes] = body if body is not None else request.stream()
        idempotent = body is not None and (request.method in SAFE_METHODS or
                                           request.url.path.endswith(READ_ONLY_ENDPOINTS))
        response = await self._send(request.method, raw_path, headers, content, idempotent)
        self._detect(response.status, response.headers)
        if request.method not in SAFE_METHODS and response.status < 300 and \
                changes_settings(request.url.path):
            self._settings.clear()  # a change made through us shows on the next search
            self._settings_epoch.advance()  # through any other worker's too
        out_headers = [(k, v) for k, v in response.raw_headers
                       if k.decode("latin-1").lower() not in HOP_BY_HOP]
        if reason is not None:
            out_headers.append((PASSTHROUGH_HEADER.encode(), reason.encode("latin-1", "replace")))
        answer: Response
        if (response.content_length or BUFFERED_BYTES + 1) <= BUFFERED_BYTES:
            # one write back: a small answer costs less read whole than streamed
            answer = Response(await _read(response), status_code=response.status)
        else:
            answer = StreamingResponse(response.content.iter_any(), status_code=response.status,
                                       background=BackgroundTask(response.release))
        answer.raw_headers = out_headers
        return answer

    async def msearch(self, items: Sequence[MsearchItem], headers: Mapping[str, str],
                      query_string: bytes) -> list[dict[str, Any]]:
        """The engine's answers to `items`, sent as one `_msearch` as the caller; an error
        of the whole call is the engine's error."""
        body = b"".join(json.dumps(part).encode() + b"\n"
                        for item in items for part in (dict(item.header), dict(item.body)))
        kept = {name: headers[name] for name in ("content-type", "accept") if name in headers}
        path = b"/_msearch" + (b"?" + query_string if query_string else b"")
        response = await self._send("POST", path, [*identity(headers).items(),
                                                   *kept.items()], body, idempotent=True)
        self._detect(response.status, response.headers)
        answer = _Answer(response.status, await _read(response))
        payload = answer.payload()
        if answer.status != 200 or not isinstance(payload, Mapping) \
                or len(payload.get("responses", ())) != len(items):
            raise EngineError(answer.status, payload)
        return list(payload["responses"])

    async def tour_settings(self, index: str, headers: Mapping[str, str]) -> dict[str, Any] | None:
        """The index's flat `index.tour.*` settings, its max_result_window when set and its
        uuid, cached `settings_ttl_s` per caller; None when the name is not exactly one index the
        caller may read (the search then passes through). Read with the caller's
        credentials; or with the sidecar's own when configured, and then kept only for a
        caller the engine lets search the index (a size-0 search as the caller), so no
        setting shapes an answer to a caller who may not read the index. Any other answer
        (401, 429, 5xx) is the engine's error, and is not cached."""
        caller = identity(headers)
        key = (caller_fingerprint(caller), index)
        now, epoch = time.monotonic(), self._settings_epoch.now()
        cached = self._settings.get(key)
        if cached is not None and cached[0] > now and cached[1] == epoch:
            self._settings.move_to_end(key)
            return cached[2]
        service = self._service_identity
        settings = await self._read_settings(index, service or caller, own=service is not None)
        if settings is not None and self._service_identity is not None \
                and not await self._may_search(index, caller):
            settings = None
        if epoch == self._settings_epoch.now():  # no write passed through meanwhile
            self._settings[key] = (now + self.config.settings_ttl_s, epoch, settings)
            self._settings.move_to_end(key)
            while len(self._settings) > self.config.settings_cache_size:
                self._settings.popitem(last=False)
        return settings

    async def _read_settings(self, index: str, who: Mapping[str, str], *, own: bool
                             ) -> dict[str, Any] | None:
        """The settings read as `who`: the sidecar's `own` identity, or a caller."""
        answer = await self._settled(
            f"/{quote(index, safe='')}/_settings/index.tour.*,index.max_result_window,"
            "index.uuid?flat_settings=true", who, own=own)
        if answer.status == 200:
            indices = answer.payload()
            if len(indices) == 1:
                return dict(next(iter(indices.values())).get("settings", {}))
        return None

    async def _may_search(self, index: str, caller: Mapping[str, str]) -> bool:
        """Whether the engine lets `caller` search `index`."""
        return (await self._search_nothing(index, caller)).status == 200

    async def _search_nothing(self, index: str, who: Mapping[str, str]) -> _Answer:
        """The cheapest search of `index` there is, as `who`."""
        return await self._settled(
            f"/{quote(index, safe='')}/_search?size=0&track_total_hits=false&terminate_after=1",
            who)

    async def _settled(self, path: str, who: Mapping[str, str], *, own: bool = False
                       ) -> _Answer:
        """A GET of `path` as `who` (the sidecar's `own` identity, or a caller) that
        settles the lookup (`_SETTLED`); any other answer is the engine's error."""
        answer = await self._exchange("GET", path.encode(), who, own=own)
        if answer.status not in _SETTLED:
            raise EngineError(answer.status, answer.payload())
        return answer

    async def detect_startup(self) -> None:
        """The engine's kind from a `GET /` as the sidecar (its client certificate, if it
        has one; no credentials), before any caller comes; a secured or unreachable engine
        leaves it unknown, to be found on a later answer."""
        if self.engine is not None:
            return
        try:
            await asyncio.wait_for(self._exchange("GET", b"/", {}, own=True), STARTUP_DETECT_S)
        except (EsTourError, TimeoutError) as exc:
            log.info("engine kind not known at startup (%s); found on the first answer",
                     type(exc).__name__)

    async def detect_engine(self, headers: Mapping[str, str], index: str) -> str:
        """"elasticsearch" when the upstream sends X-Elastic-Product, else "opensearch":
        given, found at startup or on any answer so far, or else from a size-0 search of
        `index` as the caller. Never a `GET /` as the caller: that needs
        `cluster:monitor/main`, which a reader of one index may lack, and the answer would
        then depend on who came first. The caller is about to search `index`, so a refusal
        here is the engine's own answer to its search."""
        if self.engine is None:
            answer = await self._search_nothing(index, identity(headers))
            if self.engine is None:
                raise EngineError(answer.status, answer.payload())
        return self.engine

    @property
    def own_identity(self) -> dict[str, str]:
        """The sidecar's own credentials (`service_credentials`); empty: anonymous."""
        return dict(self._service_identity or {})

    async def get_json(self, path: str, headers: Mapping[str, str]) -> tuple[int, Any]:
        """(status, body) of a small GET of `path` made as the caller `headers` name."""
        answer = await self._exchange("GET", path.encode(), headers)
        return answer.status, answer.payload()

    async def get_own_json(self, path: str) -> tuple[int, Any]:
        """(status, body) of a small GET of `path` made as the sidecar's own identity: its
        service credentials and client certificate, whichever it has (else anonymous)."""
        answer = await self._exchange("GET", path.encode(), self.own_identity, own=True)
        return answer.status, answer.payload()

    async def read_json(self, path: str, payload: Any, headers: Mapping[str, str]
                        ) -> tuple[int, Any]:
        """(status, body) of a read-only POST of `payload` as JSON to `path`, made as the
        caller `headers` name (a template rendered, say)."""
        answer = await self._exchange("POST", path.encode(), {
            **headers, "content-type": "application/json"}, json.dumps(payload).encode())
        return answer.status, answer.payload()

    async def _exchange(self, method: str, raw_path: bytes, headers: Mapping[str, str],
                        body: bytes = b"", *, own: bool = False) -> _Answer:
        """A small read the sidecar makes (settings, the engine's name, a rendered
        template), read whole: as a caller, or as its `own` identity."""
        response = await self._send(method, raw_path, list(headers.items()), body,
                                    idempotent=True, own=own)
        self._detect(response.status, response.headers)
        return _Answer(response.status, await _read(response))

    async def _send(self, method: str, raw_path: bytes, headers: list[tuple[str, str]],
                    content: bytes | AsyncIterator[bytes], idempotent: bool, own: bool = False
                    ) -> aiohttp.ClientResponse:
        """The response (body unread) of the first node that answers, over the callers'
        connections or the sidecar's `own`; 502 when none does."""
        failure: Exception | None = None
        for base in self.hosts.order():
            # verbatim: the path and query as the client encoded them, never re-quoted
            url = URL(base.rstrip("/") + raw_path.decode("latin-1"), encoded=True)
            try:
                return await self._client(own).request(method, url, headers=headers,
                                                       data=content)
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                failure = exc  # nothing reached the node: any request may go elsewhere
            except (TimeoutError, aiohttp.ClientError) as exc:
                if not idempotent:
                    raise _unreachable(base, exc) from exc
                failure = exc
            self.hosts.failed(base)
        assert failure is not None
        raise _unreachable(", ".join(self.hosts.urls), failure) from failure

    def _detect(self, status: int, headers: Mapping[str, str]) -> None:
        """Elasticsearch names itself on every answer; an OpenSearch answer says so only
        by succeeding without the header (a 401 from either may lack it)."""
        if self.engine is None:
            if headers.get("x-elastic-product") == "Elasticsearch":
                self.engine = "elasticsearch"
            elif 200 <= status < 300:
                self.engine = "opensearch"


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes

    def payload(self) -> Any:
        """The body as JSON, or as text when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body.decode("utf-8", "replace")


async def _read(response: aiohttp.ClientResponse) -> bytes:
    """The whole body as sent (compressed if it was), the connection back in the pool."""
    try:
        return await response.read()
    finally:
        response.release()


def caller_fingerprint(caller: Mapping[str, str]) -> str:
    """A digest of the caller's identity headers: cache keys hold no secrets."""
    return hashlib.sha256(repr(sorted(caller.items())).encode()).hexdigest()


def _unreachable(where: str, exc: Exception) -> UpstreamError:
    return UpstreamError(f"upstream {where} unreachable: {type(exc).__name__}: {exc}")
