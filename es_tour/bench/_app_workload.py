"""The application bench's workload (es_tour.bench.app): the request shapes an application
sends, built deterministically from the test queries, and the filters each puts on every
hit, with the qrels those filters leave."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from es_tour.datasets import TOPICS, synthetic_metadata

SHAPES = ("bool-filter", "multi-match-filter", "should-must-not", "aggs", "highlight",
          "pages", "msearch", "query-string", "query-string-field")
SHAPES_PER_QUERY = 4  # each test query gets the next 4 shapes of the rotation
SIZE = 10
SOURCE = ["title", "year", "topic"]  # what an application shows and filters on
AGGS = {"topics": {"terms": {"field": "topic"}},
        "years": {"histogram": {"field": "year", "interval": 5}}}
# no_match_size: the engine gives every hit a snippet, so a hit without one was dropped
HIGHLIGHT = {"fields": {"text": {"no_match_size": 150}}}


# ---- filters: the constraints a request puts on every hit --------------------------------

@dataclass(frozen=True)
class Range:
    """year in [gte, lte]; an open end is None."""

    field: str
    gte: int | None = None
    lte: int | None = None

    def clause(self) -> dict[str, Any]:
        bounds = {k: v for k, v in (("gte", self.gte), ("lte", self.lte)) if v is not None}
        return {"range": {self.field: bounds}}

    def passes(self, meta: Mapping[str, Any]) -> bool:
        value = meta.get(self.field)
        return (value is not None and (self.gte is None or value >= self.gte)
                and (self.lte is None or value <= self.lte))


@dataclass(frozen=True)
class Term:
    """field == value, or != value when `negated` (a must_not clause)."""

    field: str
    value: Any
    negated: bool = False

    def clause(self) -> dict[str, Any]:
        return {"term": {self.field: self.value}}

    def passes(self, meta: Mapping[str, Any]) -> bool:
        return bool(meta.get(self.field) == self.value) != self.negated


Filter = Range | Term


def satisfies(meta: Mapping[str, Any] | None, filters: Sequence[Filter]) -> bool:
    """Whether a doc with metadata `meta` (None: unknown doc) passes every filter."""
    return meta is not None and all(f.passes(meta) for f in filters)


def violations(hit_ids: Sequence[str], filters: Sequence[Filter],
               metadata: Mapping[str, Mapping[str, Any]]) -> int:
    """Hits that fail the request's filters, judged on the metadata the engine stores."""
    return sum(not satisfies(metadata.get(doc_id), filters) for doc_id in hit_ids)


def filtered_qrels(judged: Mapping[str, int], filters: Sequence[Filter],
                   metadata: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """A query's relevant docs restricted to those that pass the filters: what the best
    filtered ranking can find."""
    return {doc_id: rel for doc_id, rel in judged.items()
            if rel > 0 and satisfies(metadata.get(doc_id), filters)}


# ---- the workload ------------------------------------------------------------------------

@dataclass(frozen=True)
class Search:
    """One search body and the filters it puts on its hits."""

    body: dict[str, Any]
    filters: tuple[Filter, ...] = ()

    @property
    def first_page(self) -> bool:
        return bool(self.body.get("from", 0) == 0)


@dataclass(frozen=True)
class AppRequest:
    """A `_search` (one item) or an `_msearch` (several), from test query `query_id`."""

    id: str
    shape: str
    query_id: str
    text: str
    items: tuple[Search, ...]

    @property
    def msearch(self) -> bool:
        return self.shape == "msearch"


_QUERY_SYNTAX = re.compile(r'[+\-=&|><!(){}\[\]^"~*?:\\/]')
_OPERATORS = re.compile(r"\b(AND|OR|NOT|TO)\b")


def query_string_text(text: str) -> str:
    """Free text as a query bar sends it: Lucene syntax characters and operators removed,
    so the engine reads words."""
    return " ".join(_OPERATORS.sub(lambda m: m.group(0).lower(),
                                   _QUERY_SYNTAX.sub(" ", text)).split())


def _anchor(judged: Mapping[str, int], query_id: str) -> dict[str, Any]:
    """The metadata filters are drawn around: a judged doc's (the first relevant one by id),
    so most requests keep a judged doc; a query without one takes its id's."""
    relevant = sorted(doc_id for doc_id, rel in judged.items() if rel > 0)
    return synthetic_metadata(relevant[0] if relevant else query_id)


def _searches(shape: str, text: str, anchor: Mapping[str, Any],
              rng: random.Random) -> list[Search]:
    """The searches one shape sends for one query (pages: two; the others: one)."""
    year, topic = anchor["year"], anchor["topic"]
    match = {"match": {"text": text}}
    base = {"size": SIZE, "_source": SOURCE}
    if shape == "bool-filter":
        width = rng.randint(2, 6)
        filters: tuple[Filter, ...] = (Range("year", year - width, year + width),
                                       Term("topic", topic))
        return [Search({**base, "query": {"bool": {
            "must": [match], "filter": [f.clause() for f in filters]}}}, filters)]
    if shape == "multi-match-filter":
        filters = (Range("year", gte=year - rng.randint(0, 8)),)
        return [Search({**base, "query": {"bool": {
            "must": [{"multi_match": {"query": text, "fields": ["title", "text"]}}],
            "filter": [f.clause() for f in filters]}}}, filters)]
    if shape == "should-must-not":
        excluded = rng.choice([t for t in TOPICS if t != topic])
        filters = (Term("topic", excluded, negated=True),)
        return [Search({**base, "query": {"bool": {
            "should": [{"match": {"title": text}}, match],
            "must_not": [filters[0].clause()]}}}, filters)]
    if shape == "aggs":
        filters = (Range("year", year - 5, year + 5),)
        return [Search({**base, "query": {"bool": {
            "must": [match], "filter": [f.clause() for f in filters]}}, "aggs": AGGS}, filters)]
    if shape == "highlight":
        filters = (Term("topic", topic),)
        return [Search({**base, "query": {"bool": {
            "must": [match], "filter": [f.clause() for f in filters]}},
            "highlight": HIGHLIGHT}, filters)]
    if shape == "pages":
        return [Search({**base, "from": start, "query": match}) for start in (0, SIZE)]
    if shape == "query-string":
        return [Search({**base, "query": {"query_string": {
            "query": query_string_text(text), "fields": ["title", "text"]}}})]
    if shape == "query-string-field":  # a field-qualified term is a filter on that field
        filters = (Term("year", year),)
        return [Search({**base, "query": {"query_string": {
            "query": f"({query_string_text(text)}) AND year:{year}",
            "fields": ["title", "text"]}}}, filters)]
    raise ValueError(f"unknown shape [{shape}]")


MSEARCH_ITEMS = ("bool-filter", "multi-match-filter", "query-string")


def workload(queries: Sequence[tuple[str, str]], qrels: Mapping[str, Mapping[str, int]],
             shapes_per_query: int = SHAPES_PER_QUERY) -> list[AppRequest]:
    """The requests, in replay order: query i gets shapes i·n .. i·n + n − 1 of the rotation
    (n = shapes_per_query), so every shape recurs evenly; filters are drawn from a judged
    doc's metadata and a random generator seeded by the query id: the same input gives the
    same workload."""
    requests: list[AppRequest] = []
    for number, (query_id, text) in enumerate(queries):
        anchor = _anchor(qrels.get(query_id, {}), query_id)
        rng = random.Random(f"bench-app {query_id}")
        for turn in range(shapes_per_query):
            shape = SHAPES[(number * shapes_per_query + turn) % len(SHAPES)]
            if shape == "msearch":
                items = [s for item in MSEARCH_ITEMS for s in _searches(item, text, anchor, rng)]
                requests.append(AppRequest(f"{query_id}/{shape}", shape, query_id, text,
                                           tuple(items)))
                continue
            for page, search in enumerate(_searches(shape, text, anchor, rng)):
                suffix = f"/{page + 1}" if shape == "pages" else ""
                requests.append(AppRequest(f"{query_id}/{shape}{suffix}", shape, query_id,
                                           text, (search,)))
    return requests
