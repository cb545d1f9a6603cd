"""The engine fetches, es-tour orders: a refined search's page, total and aggregations.

The refinement gives an order to the first `window` docs (`index.tour.window`, as
Elasticsearch's `rank_window_size` or OpenSearch's `pagination_depth`). Every hit the
caller sees is fetched by the engine with the request's own body, restricted to the ids
the page needs: `_source` filtering, `fields`, `docvalue_fields`, `stored_fields`,
`script_fields`, highlight, named queries (`matched_queries`), `explain`, `version` and
`seq_no_primary_term` are the engine's, for the request's own query. Pages past the window
go on in the engine's order for that query, less the window's docs. The total and the
aggregations come from one size-0 search with the request's body, run while the
refinement runs. Each call carries the caller's credentials, so document- and field-level
security apply to all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from es_tour.engines import (
    ClientEngine,
    Overview,
    doc_key,
    ids_query,
    key_seq_no,
    names_by_key,
)
from es_tour.pipeline import FetchedDoc

# keys of a request body that a page's own calls leave out: the overview gives the total
# and the aggregations, and each call sets its own `from` and `size`
_NOT_ON_A_PAGE = ("aggs", "aggregations", "track_total_hits", "from", "size")
# the page's own calls never count: the overview does
_NO_TOTAL = {"track_total_hits": False}
# keys of a request body that change what its overview counts, besides its query
_COUNTING = ("track_total_hits", "timeout")
# keys of a request body whose hits read stored fields (the `_source` aside)
_READS_STORED = ("stored_fields", "highlight", "fields", "script_fields", "docvalue_fields",
                 "collapse")
# what a keyed page asks instead of them: no stored field, each hit's doc key
_KEYED_PAGE = {"stored_fields": "_none_", "seq_no_primary_term": True}
# where a page came from, as traced: a search with the request's body, or (a page of
# plain hits) the docs the search read to label
ENGINE_PAGE, LABELLED_DOCS = "engine", "labelled docs"
# keys of a request body whose hits can hold nothing the engine computes for its query
_PLAIN_PAGE_KEYS = frozenset({"query", "from", "size", "_source", "track_total_hits", "aggs",
                              "aggregations", "timeout"})


@dataclass(frozen=True)
class PagePlan:
    """Where a page of `from`..`from + size` comes from: the refined window's ids (in
    es-tour's order), then `rest_size` hits of the engine's order for the request's query
    from `rest_from` on, leaving out every doc of the window."""

    ids: tuple[str, ...]
    rest_from: int
    rest_size: int


def plan_page(window: Sequence[str], from_: int, size: int) -> PagePlan:
    """The page of `from_`..`from_ + size` over `window` (the refined ranking's ids) and,
    past its end, the engine's own order for the query."""
    shown = len(window)
    rest_start = max(from_, shown)
    return PagePlan(tuple(window[from_: from_ + size]), max(from_ - shown, 0),
                    max(from_ + size - rest_start, 0))


def overview_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's own search at size 0: its hits.total (as its track_total_hits asks)
    and its aggregations, as the engine computes them for its query and post_filter."""
    return {**_without(body, ("from", "size", "sort")), "size": 0}


def counted_by_a_leg(body: Mapping[str, Any], params: Mapping[str, str],
                     lexical: Mapping[str, Any] | None) -> Overview | None:
    """The overview for the pool's lexical leg to count, one search fewer, where that leg
    runs the request's own query (`lexical`) and nothing else of the request changes what
    the overview counts: no URL parameters, no `post_filter` (the leg keeps it as a
    filter) and no top-level `knn` (whose docs the total counts). Not for aggregations:
    the engine's request cache answers a size-0 search asked again, never a leg. None
    where the overview goes apart."""
    if not overview_alongside(params) or lexical is None or any(
            key in body for key in ("post_filter", "knn", "aggs", "aggregations")):
        return None
    return Overview({key: body[key] for key in _COUNTING if key in body})


def fetch_body(body: Mapping[str, Any], ids: Sequence[str], keyed: bool = False
               ) -> dict[str, Any]:
    """The request's own body, fetching exactly `ids`: its query scores and names them
    (highlight, matched_queries, explain), and docs the refinement found that the query
    does not match come back too. `keyed` (a body that `shows_names_alone`, `ids` doc
    keys): its hits load no stored field and carry their doc keys, for `named_hits`."""
    query: dict[str, Any] = {"bool": {"filter": [ids_query(ids)]}}
    if "query" in body:
        query["bool"]["should"] = [body["query"]]
    # Elasticsearch's top-level knn would add its own nearest docs to the page
    page = _without(body, (*_NOT_ON_A_PAGE, "knn"))
    if keyed:
        page = {**_without(page, ("stored_fields", "_source")), **_KEYED_PAGE}
    elif hides_ids(body):  # the ids order the page: asked for, then left out (`render`)
        page = {**_without(page, ("stored_fields",)), "_source": False}
    return {**page, **_NO_TOTAL, "query": query, "size": len(ids)}


def shows_names_alone(body: Mapping[str, Any]) -> bool:
    """Whether the request's hits show no stored field but what names each doc (its `_id`
    and `_routing`): no `_source`, nor anything else read from stored fields. Its page can
    then load none, as a pool leg does, and name its hits as the fetches that read their
    text met them: loading each hit's `_id`, a stored-field read, is most of such a page's
    engine CPU."""
    return hides_ids(body) or (body.get("_source") is False
                               and not any(key in body for key in _READS_STORED))


def named_hits(hits: Sequence[Mapping[str, Any]],
               known_name: Callable[[str], Mapping[str, Any] | None]
               ) -> list[dict[str, Any]] | None:
    """A keyed page's hits, each with its doc's name (`known_name` of its doc key), as it
    would have come loading its stored fields; None where one's name is not known."""
    named = []
    for hit in hits:
        name = known_name(doc_key(hit["_seq_no"]))
        if name is None:
            return None
        named.append({"_index": hit.get("_index"), **name, **hit})
    return named


def holds_whole_source(body: Mapping[str, Any]) -> bool:
    """Whether the request's hits hold each doc's whole `_source`: it filters none, and
    asks for no stored field instead."""
    return body.get("_source", True) is True and "stored_fields" not in body


def plain_hits(body: Mapping[str, Any]) -> bool:
    """Whether the request's hits show only what names each doc, its score (es-tour's, in
    the window) and its whole `_source` or none: no fetch option, sort or named query
    (whose `matched_queries` the engine's fetch would add). Such a hit is the doc as any
    fetch of it reads it, so a page of docs the search fetched to label needs no search of
    its own (`PageAhead`)."""
    return (set(body) <= _PLAIN_PAGE_KEYS and isinstance(body.get("_source", True), bool)
            and not _names_a_clause(body.get("query")))


def _names_a_clause(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "_name" in value or any(_names_a_clause(item) for item in value.values())
    if isinstance(value, list):
        return any(_names_a_clause(item) for item in value)
    return False


def hides_ids(body: Mapping[str, Any]) -> bool:
    """Whether the request asks for hits without even their `_id` (`stored_fields:
    _none_`)."""
    return body.get("stored_fields") in ("_none_", ["_none_"])


def rest_body(body: Mapping[str, Any], window: Sequence[str], from_: int, size: int
              ) -> dict[str, Any]:
    """The request's own search in the engine's order from `from_`, leaving out the
    refined window's docs."""
    page = {**_without(body, _NOT_ON_A_PAGE), **_NO_TOTAL, "from": from_, "size": size}
    if not window:
        return page
    left_out = {"bool": {"must_not": [ids_query(window)]}}
    knn = body.get("knn")
    if "query" in body or not isinstance(knn, Mapping):
        page["query"] = {"bool": {"must": [body.get("query", {"match_all": {}})],
                                  "filter": [left_out]}}
    if isinstance(knn, Mapping):  # Elasticsearch's top-level knn: its hits leave them out too
        given = knn.get("filter", [])
        page["knn"] = {**knn, "filter": [*(given if isinstance(given, list) else [given]),
                                         left_out]}
    return page


@dataclass(frozen=True)
class Fetched:
    """The engine's hits of a page, in page order, and whether any call timed out."""

    hits: list[dict[str, Any]]
    timed_out: bool
    hide_ids: bool = False  # the request asked for hits without their `_id`
    # doc key -> its name (`hit_name`), for the page's docs it asked by doc key (`fetch_page`)
    doc_names: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    came_from: str = ENGINE_PAGE  # where the page came from, as the trace says


def overview_alongside(params: Mapping[str, str]) -> bool:
    """Whether the overview can go in the page's own round trip (`fetch_page`): a request
    with URL parameters sends it apart, as `_msearch` takes few of them per search."""
    return not params


async def fetch_page(engine: ClientEngine, index: str, body: Mapping[str, Any],
                     params: Mapping[str, str], window: Sequence[str], plan: PagePlan,
                     *, with_overview: bool = False
                     ) -> tuple[Fetched, dict[str, Any] | None]:
    """The page's hits as the engine fetches them: the window's part in es-tour's order,
    then the engine's own order past the window. A doc deleted since it was ranked is
    left out, as the engine would. `with_overview` (a request without URL parameters)
    adds the overview's search to the same `_msearch` and returns its answer too. The
    window's docs a pool leg named by doc key are asked by it, their `_id`s learned from
    the page (`Fetched.doc_ids`) rather than by a search of their own first."""
    searches, page_params = [], _page_params(params)
    by_key = any(key_seq_no(doc) is not None for doc in plan.ids)
    if plan.ids:
        searches.append({**fetch_body(body, plan.ids),
                         **({"seq_no_primary_term": True} if by_key else {})})
    if plan.rest_size:
        searches.append(rest_body(body, window, plan.rest_from, plan.rest_size))
    if with_overview:
        searches.append(overview_body(body))
    if overview_alongside(params) and len(searches) > 1:
        answers = []
        for answer in await engine.msearch([(index, search) for search in searches]):
            if isinstance(answer, Exception):
                raise answer
            answers.append(answer)
    else:
        answers = list(await asyncio.gather(*(engine.search(index, search, page_params)
                                              for search in searches)))
    overview = answers.pop() if with_overview else None
    hits = _in_page_order(answers[0]["hits"]["hits"], plan.ids) if plan.ids else []
    doc_names = names_by_key(hits)
    if by_key and not body.get("seq_no_primary_term"):  # asked for the doc keys' sake
        hits = [_without(hit, ("_seq_no", "_primary_term")) for hit in hits]
    if plan.rest_size:
        hits += answers[-1]["hits"]["hits"]
    return Fetched(hits, any(answer.get("timed_out", False) for answer in answers),
                   hides_ids(body), doc_names), overview


class PageAhead:
    """A page fetched in the round trip of a refinement's last text fetch, one less for the
    sidecar to wait for: told the docs the answer will rank first (`SearchContext.
    page_ahead`), it asks the engine for all of them with the request's body, and the
    overview, when the page must come from among them: a request without URL parameters,
    its page within the window and within those docs. The page is then cut from that
    answer (`fetched`), in es-tour's order, exactly as `fetch_page` would fetch it.

    Given the docs the search `held` (fetched or found kept to label them, as this caller
    sees them), a page of plain hits (`plain_hits`) is answered from them instead, every
    method's: no page search at all, the overview alone alongside where no leg counted it.
    """

    def __init__(self, engine: ClientEngine, index: str, body: Mapping[str, Any],
                 from_: int, size: int, window: int, counted: Overview | None = None,
                 held: Mapping[str, FetchedDoc] | None = None):
        self._engine, self._index, self._body = engine, index, body
        self._from, self._size, self._window = from_, size, window  # window: its depth
        self._counted = counted  # the overview a pool leg counted, if it did
        self._held = held if held is not None and plain_hits(body) else None
        self._asked: tuple[str, ...] = ()
        self._keyed = False  # the page asked by doc key, loading no stored field
        self._answers: list[asyncio.Future[dict[str, Any]]] = []

    def ask(self, ranked_first: Sequence[str]) -> asyncio.Future[dict[str, Any]] | None:
        """Fetch the docs of `ranked_first`, where the page lies among them, alongside. The
        page's answer to come where its hits hold each doc's whole `_source` (a body that
        filters no source): the text to label is then read from it, no fetch of its own.
        A page of held docs asks only the overview, where no leg counted it."""
        end = self._from + self._size
        if self._answers or not self._size or end > min(len(ranked_first), self._window):
            return None
        if self._held is not None:
            self._ask_overview()
            return None
        self._asked = tuple(ranked_first)
        self._keyed = shows_names_alone(self._body) and all(
            key_seq_no(doc) is not None for doc in self._asked)
        page = fetch_body(self._body, self._asked, keyed=self._keyed)
        readable = holds_whole_source(self._body)
        if readable and any(key_seq_no(doc) is not None for doc in self._asked):
            page["seq_no_primary_term"] = True  # each hit's `_id` learned by its doc key
        self._answers = [self._engine.search_alongside(self._index, page)]
        self._ask_overview()
        return self._answers[0] if readable else None

    def _ask_overview(self) -> None:
        if leg_answer(self._counted) is None:
            self._answers.append(
                self._engine.search_alongside(self._index, overview_body(self._body)))

    async def fetched(self, plan: PagePlan) -> tuple[Fetched, dict[str, Any]] | None:
        """The page of `plan` (its ids by `_id`) and the overview, from what `ask` fetched,
        waited for where still on its way (a last round whose docs were all kept in the doc
        cache fetched no text to wait for); None where it fetched nothing, failed, the
        ranking left the docs it was told of (a round-0 fallback), or a keyed page holds a
        doc no fetch of the search named. A page of plain hits comes from the held docs
        (`_from_held`)."""
        if self._held is not None:
            return await self._from_held(plan)
        asked = set(map(self._engine.known_id, self._asked))
        if not self._answers or plan.rest_size or not set(plan.ids) <= asked:
            return None
        answers = await self._answered()
        if answers is None:
            return None
        page, *overview = answers
        hits = page["hits"]["hits"]
        if self._keyed:
            hits = named_hits(hits, self._engine.known_name)
            if hits is None:
                return None
        hits = _in_page_order(hits, plan.ids)
        if not self._body.get("seq_no_primary_term"):  # asked for the doc keys' sake
            hits = [_without(hit, ("_seq_no", "_primary_term")) for hit in hits]
        return Fetched(hits, page.get("timed_out", False), hides_ids(self._body)), (
            overview[0] if overview else leg_answer(self._counted) or {})

    async def _from_held(self, plan: PagePlan) -> tuple[Fetched, dict[str, Any]] | None:
        """The page of `plan` from the held docs, each hit as the engine's fetch would give
        it, and the overview: a leg's count, or the search `ask` sent alongside, or one
        sent now (a method that told `ask` nothing). None where the page goes past the
        window, holds a doc no fetch of the search read (deleted since the leg met it), or
        the overview failed: `fetch_page` then fetches both, and meets its error again."""
        assert self._held is not None
        if plan.rest_size:
            return None
        by_id = {doc.name.get("_id"): doc for doc in self._held.values()}
        hits = []
        for name in plan.ids:
            doc = self._held.get(name) or by_id.get(name)
            if doc is None or doc.index is None or "_id" not in doc.name:
                return None
            hit = {"_index": doc.index, **doc.name, "_score": None}
            if self._body.get("_source", True):
                hit["_source"] = doc.whole_source()
            hits.append(hit)
        counted = leg_answer(self._counted)
        if counted is not None:
            return Fetched(hits, False, came_from=LABELLED_DOCS), counted
        if not self._answers:
            self._ask_overview()
        answers = await self._answered()
        return None if answers is None else (
            Fetched(hits, False, came_from=LABELLED_DOCS), answers[0])

    async def _answered(self) -> list[dict[str, Any]] | None:
        """The answers of the searches `ask` sent, waited for; None where one failed."""
        await asyncio.wait(self._answers)
        if not all(not answer.cancelled() and answer.exception() is None
                   for answer in self._answers):
            return None
        return [answer.result() for answer in self._answers]

    def settle(self) -> None:
        """Drop the answers no page read (an error of theirs, `fetch_page` meets again)."""
        for answer in self._answers:
            if not answer.done():
                answer.cancel()
            elif not answer.cancelled():
                answer.exception()


def leg_answer(overview: Overview | None) -> dict[str, Any] | None:
    """The answer of the pool leg that counted `overview`; None where none did."""
    return None if overview is None else overview.answer


def _in_page_order(hits: Sequence[dict[str, Any]], ids: Sequence[str]
                   ) -> list[dict[str, Any]]:
    """The hits of a fetch of `ids` (`_id`s, or doc keys where the hits carry their
    `_seq_no`), in their order; a doc deleted since it was ranked is left out, as the
    engine would."""
    found = {}
    for hit in hits:
        found[hit["_id"]] = hit
        if "_seq_no" in hit:
            found[doc_key(hit["_seq_no"])] = hit
    return [found[doc] for doc in ids if doc in found]


def _page_params(params: Mapping[str, str]) -> dict[str, str]:
    """The request's URL parameters for the page's calls: the total is the overview's."""
    return {key: value for key, value in params.items() if key != "track_total_hits"}


def _without(body: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in keys}
