"""Reading a `_search` request: what the sidecar can serve, and why it passes the rest through.

A request is served when it searches one index with a query text (a text clause alone or
in a `bool`, see `_query`, or ext.tour.query_text) and maybe a query vector (ES top-level
`knn.query_vector` or the OpenSearch `query.knn.<field>.vector` clause). Its filters are
kept for every round. The request body itself is kept: the engine fetches the page with it
(`_fetch`), so fetch options, highlight, named queries, totals and aggregations are the
engine's. What the pipeline cannot give an order for (sorting by a field, scrolling,
collapsing, rescoring, ...) passes through.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from reprlib import repr as shown
from typing import Any
from urllib.parse import unquote

import numpy as np
from starlette.requests import Request

from es_tour.errors import BodyTooLargeError, ConfigError
from es_tour.server._passthrough import Passthrough, Reason
from es_tour.server._query import QueryParts, query_parts

# Body keys the sidecar honours: what chooses the docs (the query, its filters), and what
# the engine's own fetch of the page and its size-0 overview honour as written (`_fetch`).
# Any other key sends the request through untouched.
BODY_KEYS = frozenset({"query", "knn", "size", "from", "ext", "timeout", "sort",
                       "track_total_hits", "aggs", "aggregations", "post_filter",
                       "_source", "fields", "docvalue_fields", "stored_fields", "script_fields",
                       "highlight", "explain", "version", "seq_no_primary_term", "track_scores"})
# Body keys whose meaning depends on the engine's own order: each passes the request through.
_UNSERVED = {"collapse": Reason.COLLAPSE, "rescore": Reason.RESCORE,
             "search_after": Reason.SEARCH_AFTER, "pit": Reason.PIT, "suggest": Reason.SUGGEST,
             "profile": Reason.PROFILE, "min_score": Reason.MIN_SCORE,
             "terminate_after": Reason.TERMINATE_AFTER, "indices_boost": Reason.INDICES_BOOST}
# URL parameters likewise: each passes the request through
_UNSERVED_PARAMS = {"scroll": Reason.SCROLL, "terminate_after": Reason.TERMINATE_AFTER,
                    "routing": Reason.ROUTING}
# URL parameters the sidecar honours: each goes on to the engine's own calls (`_fetch`), or
# says how the answer is printed.
PARAMS = frozenset({"size", "from", "_source", "_source_includes", "_source_excludes",
                    "stored_fields", "docvalue_fields", "explain", "version",
                    "seq_no_primary_term", "pretty", "human", "error_trace", "timeout",
                    "rest_total_hits_as_int", "track_total_hits", "request_cache",
                    "preference", "ignore_unavailable", "allow_no_indices",
                    "expand_wildcards", "typed_keys", "search_type",
                    "allow_partial_search_results", "ccs_minimize_roundtrips",
                    "max_concurrent_shard_requests", "pre_filter_shard_size",
                    "batched_reduce_size", "sort", "track_scores"})
# ... of which these shape the sidecar's own answer, and never reach the engine
_PRINTING = frozenset({"pretty", "human", "error_trace"})


# The longest integer literal a body may hold: past int64 no engine takes it, and Python's
# own int() of a 5,000-digit literal is an error of its own.
MAX_INT_DIGITS = 20
# An origin-form path (RFC 3986 §3.3): `/` and segments of pchars (unreserved, %XX,
# sub-delims, ":", "@"). A leading `//` would make it an authority, and the engines
# themselves answer 400 to the characters left out (`<`, `{`, `|`, ...).
_PATH = re.compile(r"/(?!/)(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
# A query string is the engine's to judge (OpenSearch takes `q=title:[a TO z]` with raw
# brackets and quotes): only what no request line may carry is refused, spaces, control
# and non-ASCII bytes.
_QUERY = re.compile(r"[\x21-\x7e]*")
# UTF-16 halves without their pair: valid JSON (`"\ud800"`), but no text a tokenizer takes
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class MalformedJson(ConfigError):
    """The body is no JSON at all: on an index the sidecar does not serve, the engine gives
    its own 400. Numbers out of range are plain ConfigErrors, answered by the sidecar, since
    the engines answer some of those with a 500 (`"size": 1e999`)."""


@dataclass(frozen=True)
class SearchRequest:
    """A `_search` the sidecar will answer itself."""

    index: str
    text: str | None
    vector: np.ndarray | None  # (d,) float32, when the request carries one
    vector_field: str | None  # the field the request's knn clause names
    size: int
    from_: int
    # the body as sent, less `ext`: the engine fetches the page, counts the total and
    # computes the aggregations with it (`_fetch`)
    body: Mapping[str, Any] = field(default_factory=dict)
    # the URL parameters that go on to the engine (all but size, from and printing ones)
    params: Mapping[str, str] = field(default_factory=dict)
    # constraints every engine call of every round keeps: filter, must_not, post_filter,
    # required clauses on fields that are not text
    filters: tuple[Mapping[str, Any], ...] = ()
    # the BM25 leg's query: the request's own, as written; None: the text's multi_match
    lexical: Mapping[str, Any] | None = None
    tour: dict[str, Any] = field(default_factory=dict)  # ext.tour less query_text, timeout_ms
    timeout_ms: int | None = None
    explicit: bool = False  # the request itself asked for es-tour (ext.tour)
    pretty: bool = False


def search_target(method: str, raw_path: str) -> str | None:
    """The index part of a `_search` path ("" for `/_search`), or None for any other call.

    raw_path is the path as the client encoded it: it is decoded here, once, as the engine
    decodes it (a decoded path would be decoded twice: `my%2541` would name `myA`)."""
    if method not in ("GET", "POST"):
        return None
    parts = [p for p in raw_path.split("/") if p]
    if parts == ["_search"]:
        return ""
    if len(parts) == 2 and parts[1] == "_search" and (parts[0] == "_all"
                                                      or not parts[0].startswith("_")):
        return unquote(parts[0])
    return None


def msearch_target(method: str, raw_path: str) -> str | None:
    """The default index of an `_msearch` path ("" for `/_msearch`), or None for any other
    call."""
    return search_target(method, raw_path.replace("/_msearch", "/_search")) \
        if raw_path.rstrip("/").endswith("/_msearch") else None


@dataclass(frozen=True)
class MsearchItem:
    """One search of an `_msearch`: its header line (naming its index) and its body."""

    header: Mapping[str, Any]
    body: Mapping[str, Any]

    @property
    def index(self) -> str:
        index = self.header.get("index", "")
        return ",".join(index) if isinstance(index, list) else str(index)

    @property
    def params(self) -> dict[str, str]:
        """The header's search parameters, as the URL of one `_search` would carry them."""
        return {key: str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in self.header.items() if key != "index"}


# `_msearch` URL parameters that the engine applies to each search: each refined search
# gets them as its own (its header's win) ...
_MSEARCH_EACH = frozenset({"search_type", "typed_keys", "rest_total_hits_as_int",
                           "pre_filter_shard_size", "max_concurrent_shard_requests",
                           "ccs_minimize_roundtrips"})
# ... and those of the whole call: how many at once (the sidecar's slots bound its own), and
# how the answer is printed
_MSEARCH_WHOLE = frozenset({"max_concurrent_searches", *_PRINTING})


def msearch_params(params: Mapping[str, str]) -> dict[str, str]:
    """The `_msearch` URL parameters each of its searches takes; Passthrough for one the
    sidecar cannot honour for a whole answer (`filter_path` prunes it), which the engine
    answers (or refuses) for all its searches."""
    for key in params:
        if key not in _MSEARCH_EACH | _MSEARCH_WHOLE:
            raise Passthrough(Reason.PARAMETER, key=key)
    return {key: value for key, value in params.items() if key in _MSEARCH_EACH}


def parse_msearch(raw: bytes, default_index: str) -> list[MsearchItem]:
    """The searches of an `_msearch` body (NDJSON: a header line, then a body line, per
    search), each naming its index (the URL's when its header does not)."""
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if not lines or len(lines) % 2:
        raise MalformedJson("an _msearch body is pairs of a header line and a body line")
    items = []
    for header_line, body_line in zip(lines[::2], lines[1::2], strict=True):
        header = parse_body(header_line)
        if "index" not in header and default_index:
            header = {**header, "index": default_index}
        items.append(MsearchItem(header, parse_body(body_line)))
    return items


def check_path(raw_path: bytes, query: bytes = b"") -> None:
    """A 400 for a request target that is no valid URL: its path, or its query string."""
    if not _PATH.fullmatch(raw_path.decode("latin-1")):
        raise ConfigError(f"invalid URL path [{shown(raw_path.decode('latin-1'))}]")
    if not _QUERY.fullmatch(query.decode("latin-1")):
        raise ConfigError(f"invalid URL query [{shown(query.decode('latin-1'))}]")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or a 413 as soon as it is past `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"request body of {declared} bytes is past this server's "
                                f"limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"request body is past this server's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


# zlib window bits per Content-Encoding a client may compress its body with
_INFLATE = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def inflated(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """The body a client compressed (`http_compress=True` in the official clients sends
    gzip), inflated to at most `limit` bytes; as sent when it names no encoding."""
    codec = (encoding or "identity").strip().lower()
    if codec == "identity":
        return raw
    if codec not in _INFLATE:
        raise MalformedJson(f"request body has an unsupported Content-Encoding [{shown(codec)}]")
    inflater = zlib.decompressobj(_INFLATE[codec])
    try:
        body = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise MalformedJson(f"request body is not valid {codec}: {exc}") from None
    if len(body) > limit:
        raise BodyTooLargeError(f"request body inflates past this server's limit of {limit} "
                                "bytes")
    return body


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON body (empty -> {}). Malformed JSON is a 400, and so are numbers no engine
    takes (NaN, Infinity, 1e999, integers past MAX_INT_DIGITS) and nesting deeper than
    the interpreter recurses."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_int=_json_int, parse_float=_json_float,
                          parse_constant=_json_constant, object_pairs_hook=_json_object)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedJson(f"request body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ConfigError("request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ConfigError("request body must be a JSON object")
    return body


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: the engines refuse a duplicate (`"query"` twice),
    where a dict would keep the last silently."""
    body = dict(pairs)
    if len(body) < len(pairs):
        twice = next(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        raise MalformedJson(f"request body has the field [{shown(twice)}] twice")
    return body


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ConfigError(f"number [{shown(text)}] has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ConfigError(f"number [{shown(text)}] is out of range")
    return value


def _json_constant(text: str) -> float:
    raise ConfigError(f"[{text}] is not a JSON number")


def wants_tour(body: Mapping[str, Any]) -> bool:
    ext = body.get("ext")
    return isinstance(ext, Mapping) and "tour" in ext


def parse_search(target: str, params: Mapping[str, str], body: Mapping[str, Any],
                 *, explicit: bool, text_fields: Sequence[str] | None = None) -> SearchRequest:
    """The request as the sidecar will run it; raises Passthrough for what it cannot serve
    and ConfigError for what is malformed. `text_fields` tells the text clauses from the
    filters (None: every field is text)."""
    if not target or any(c in target for c in ",*") or target == "_all":
        raise Passthrough(Reason.MULTI_INDEX)
    for key in params:
        if key in _UNSERVED_PARAMS:
            raise Passthrough(_UNSERVED_PARAMS[key])
        if key not in PARAMS:
            raise Passthrough(Reason.PARAMETER, key=key)
    for key in body:
        if key in _UNSERVED:
            raise Passthrough(_UNSERVED[key])
        if key not in BODY_KEYS:
            raise Passthrough(Reason.BODY_KEY, key=key)
    _check_sort(params.get("sort"), body.get("sort"))
    tour = _ext_tour(body)
    parts, vector, vector_field = _query(body, text_fields)
    text = parts.text
    query_text = tour.pop("query_text", None)
    if query_text is not None:
        if not isinstance(query_text, str) or not query_text.strip():
            raise ConfigError("ext.tour.query_text must be a non-empty string, "
                              f"got {shown(query_text)}")
        text = query_text
    if text is None:
        raise Passthrough(Reason.NO_TEXT)
    if not text.strip():  # the engine matches nothing; an embedding of "" finds anything
        raise Passthrough(Reason.EMPTY_TEXT)
    text = _LONE_SURROGATE.sub("\ufffd", text)  # as the engine's own JSON parser reads it
    timeout_ms = tour.pop("timeout_ms", None)
    if timeout_ms is not None and (not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool)
                                   or timeout_ms < 1):
        raise ConfigError(f"ext.tour.timeout_ms must be an integer >= 1, got {shown(timeout_ms)}")
    if "stored_fields" in params:  # the URL's wins, as the engine reads it; `_fetch` reads it
        body = {**body, "stored_fields": params["stored_fields"].split(",")}
    size = _count("size", params.get("size", body.get("size", 10)))
    if size == 0:  # counts and facets only: the engine's answer is the whole answer
        raise Passthrough(Reason.SIZE_0)
    return SearchRequest(
        index=target, text=text, vector=vector, vector_field=vector_field, size=size,
        from_=_count("from", params.get("from", body.get("from", 0))),
        body=_as_the_engine_reads({key: value for key, value in body.items() if key != "ext"}),
        params={key: value for key, value in params.items()
                if key not in ("size", "from", "stored_fields") and key not in _PRINTING},
        filters=(*parts.filters, *filter(None, [_mapping(body, "post_filter")])),
        lexical=body.get("query") if parts.texts else None, tour=tour,
        timeout_ms=timeout_ms, explicit=explicit,
        pretty=params.get("pretty", "false") in ("", "true"),
    )


def _as_the_engine_reads(value: Any) -> Any:
    """`value` with each lone UTF-16 surrogate of its strings read as U+FFFD, as the engine's
    own JSON parser reads it: the engine's calls re-send the body, as UTF-8."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {_as_the_engine_reads(key): _as_the_engine_reads(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_as_the_engine_reads(item) for item in value]
    return value


def _check_sort(param: str | None, sort: Any) -> None:
    """Sorting by relevance is what the sidecar does; by anything else passes through."""
    specs = ([] if param is None else param.split(",")) + (
        [] if sort is None else sort if isinstance(sort, list) else [sort])
    for spec in specs:
        by_score = spec in ("_score", "_score:desc") or (
            isinstance(spec, Mapping) and list(spec) == ["_score"]
            and spec["_score"] in ("desc", {"order": "desc"}))
        if not by_score:
            raise Passthrough(Reason.SORT)


def _mapping(body: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The object under `key`, or None when the body has none."""
    value = body.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] must be an object, got {shown(value)}")
    return value


def _ext_tour(body: Mapping[str, Any]) -> dict[str, Any]:
    ext = body.get("ext", {})
    if not isinstance(ext, Mapping):
        raise ConfigError("ext must be an object")
    others = [key for key in ext if key != "tour"]
    if others:
        raise Passthrough(Reason.EXT, keys=others)
    tour = ext.get("tour", {})
    if not isinstance(tour, Mapping):
        raise ConfigError(f"ext.tour must be an object, got {shown(tour)}")
    return dict(tour)


def _query(body: Mapping[str, Any], text_fields: Sequence[str] | None
           ) -> tuple[QueryParts, np.ndarray | None, str | None]:
    """(the query's parts, vector, vector field) from `query` and the ES top-level `knn`."""
    vector = vector_field = None
    knn = body.get("knn")
    if knn is not None:
        if not isinstance(knn, Mapping):
            raise Passthrough(Reason.KNN_CLAUSES)
        unknown = set(knn) - {"field", "query_vector", "k", "num_candidates", "boost"}
        if unknown:
            raise Passthrough(Reason.OPTION, clause="knn", options=sorted(unknown))
        if "query_vector" not in knn:
            raise Passthrough(Reason.KNN_WITHOUT_VECTOR)
        vector, vector_field = _vector(knn["query_vector"]), knn.get("field")
        if vector_field is not None and not isinstance(vector_field, str):
            raise ConfigError(f"knn.field must be a string, got {shown(vector_field)}")
    query = body.get("query")
    if query is None:
        return QueryParts(), vector, vector_field
    if not isinstance(query, Mapping) or len(query) != 1:
        raise ConfigError("query must be an object with exactly one clause")
    ((kind, clause),) = query.items()
    if kind == "knn" and vector is None:
        if not isinstance(clause, Mapping) or len(clause) != 1:
            raise Passthrough(Reason.FIELDS, kind="knn query")
        ((vector_field, spec),) = clause.items()
        if not isinstance(spec, Mapping) or "vector" not in spec:
            raise Passthrough(Reason.KNN_QUERY_WITHOUT_VECTOR)
        unknown = set(spec) - {"vector", "k", "boost"}
        if unknown:
            raise Passthrough(Reason.OPTION, clause="knn", options=sorted(unknown))
        return QueryParts(), _vector(spec["vector"]), vector_field
    return query_parts(query, text_fields), vector, vector_field


def _vector(value: Any) -> np.ndarray:
    if not isinstance(value, list) or not value or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise ConfigError("a query vector must be a non-empty list of numbers")
    with np.errstate(over="ignore"):  # past float32's range is caught just below
        vector = np.asarray(value, dtype=np.float32)
    if not np.all(np.isfinite(vector)) or not np.any(vector):
        raise ConfigError("a query vector must be finite and not all zeros")
    return vector


def _count(name: str, value: Any) -> int:
    """`size` or `from`: an integer >= 0, from the body (a number) or the URL (digits)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() \
            and len(value) <= MAX_INT_DIGITS:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} must be an integer >= 0, got {shown(value)}")
    return value
