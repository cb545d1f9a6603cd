"""Searches asked for in the same turn of the event loop, sent in one round trip."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from cachetools import TTLCache

from es_tour.errors import EngineError

# (index, body, named scores?) -> the engine's answer
SearchOne = Callable[[str, Mapping[str, Any], bool], Awaitable[dict[str, Any]]]
# the answers of several (index, body) searches in order, each a dict or its own error
SearchMany = Callable[[Sequence[tuple[str, Mapping[str, Any]]], bool], Awaitable[Sequence[Any]]]
_Pending = list[tuple[str, dict[str, Any], "asyncio.Future[dict[str, Any]]"]]
T = TypeVar("T")


class SearchBatch:
    """The searches one engine view is asked for in the same turn of the event loop, sent
    together: one alone as a search, several as one `_msearch`. A round's BM25 and kNN
    legs, gathered by its method, so cost one round trip, with no method knowing."""

    def __init__(self, search_one: SearchOne, search_many: SearchMany):
        self._search_one = search_one
        self._search_many = search_many
        # by whether they ask named queries' scores: a URL parameter of the whole `_msearch`
        self._pending: dict[bool, _Pending] = {}

    async def search(self, index: str, body: dict[str, Any], *, named_scores: bool = False
                     ) -> dict[str, Any]:
        """`body`'s answer; `named_scores`: each hit's `matched_queries` a map of the named
        queries it matches to their scores (`include_named_queries_score`)."""
        return await self.submit(index, body, named_scores=named_scores)

    def submit(self, index: str, body: dict[str, Any], *, named_scores: bool = False
               ) -> asyncio.Future[dict[str, Any]]:
        """The answer to come of a search joined to this turn's round trip, at once."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        if not self._pending:
            # two turns: the tasks gathered beside this one reach their own call first
            loop.call_soon(loop.call_soon, self._send)
        self._pending.setdefault(named_scores, []).append((index, body, answer))
        return answer

    def _send(self) -> None:
        pending, self._pending = self._pending, {}
        for named_scores, searches in pending.items():
            task = asyncio.get_running_loop().create_task(self._answer(searches, named_scores))
            task.add_done_callback(lambda done: done.exception())  # each error is its caller's

    async def _answer(self, pending: _Pending, named_scores: bool) -> None:
        answers = [answer for *_, answer in pending]
        results: list[Any]  # each search's answer, or the error it gets
        try:
            if len(pending) == 1:
                index, body, _ = pending[0]
                results = [await self._search_one(index, body, named_scores)]
            else:
                results = list(await self._search_many(
                    [(index, body) for index, body, _ in pending], named_scores))
        except Exception as exc:  # every caller waiting gets the call's error
            results = [exc] * len(answers)
        except asyncio.CancelledError:
            for answer in answers:
                answer.cancel()
            raise
        for answer, result in zip(answers, results, strict=True):
            if answer.done():  # its caller was cancelled meanwhile
                continue
            if isinstance(result, BaseException):
                answer.set_exception(result)
            else:
                answer.set_result(result)


def identity(headers: Mapping[str, str] | None) -> str:
    """A digest naming the caller whose credentials `headers` carry."""
    return hashlib.blake2b(repr(sorted((headers or {}).items())).encode(),
                           digest_size=16).hexdigest()


def answer_or_error(response: dict[str, Any]) -> dict[str, Any] | EngineError:
    if "error" not in response:
        return response
    status = int(response.get("status", 500))
    return EngineError(status, {"error": response["error"], "status": status})


class MultiSearch:
    """The batched searches of an engine adapter (`ClientEngine`): one view's, in its
    caller's identity."""

    _client: Any
    _headers: dict[str, str] | None
    _batch: SearchBatch
    _api_error: type[Exception]
    _transport_error: type[Exception]  # an engine not reached (opensearch-py: an _api_error)
    # (endpoint, identity) the engine refused (`ClientEngine`)
    _refused: TTLCache[tuple[str, str], bool]
    _error_answer: Callable[[Exception], tuple[int, object]]

    def _new_batch(self) -> SearchBatch:
        """A batch of this view's own: searches batched together share its identity."""
        return SearchBatch(self._search_one, self.msearch)

    def _named_scores(self, on: bool) -> dict[str, Any]:
        """The client's keywords asking `include_named_queries_score`, where `on`."""
        return {"params": {"include_named_queries_score": "true"}} if on else {}

    async def _search_one(self, index: str, body: Mapping[str, Any],
                          named_scores: bool = False) -> dict[str, Any]:
        return dict(await self._client.search(index=index, body=dict(body),
                                              **self._named_scores(named_scores)))

    async def msearch(self, searches: Sequence[tuple[str, Mapping[str, Any]]],
                      named_scores: bool = False) -> list[dict[str, Any] | EngineError]:
        """Several (index, body) searches in one `_msearch` round trip, each answer in
        order: a search's own error answer as the EngineError, with its status, that the
        search alone would have raised. `named_scores` as `SearchBatch.search` takes it.

        Elasticsearch's `read` privilege grants `_msearch`; OpenSearch Security checks it
        as a cluster action (`cluster_composite_ops_ro`), which a reader of one index may
        lack. An identity the engine refused it is sent each search on its own, at once
        (`unless_refused`)."""
        lines: list[Mapping[str, Any]] = []
        for index, body in searches:
            lines += [{"index": index}, body]
        answer = await self.unless_refused("_msearch", lambda: self._client.msearch(
            body=lines, **self._named_scores(named_scores)))
        if answer is not None:
            return [answer_or_error(dict(response)) for response in answer["responses"]]
        return list(await asyncio.gather(*(self._one_or_error(index, body, named_scores)
                                           for index, body in searches)))

    async def unless_refused(self, endpoint: str, call: Callable[[], Awaitable[T]]) -> T | None:
        """`call`'s answer; None where the engine refuses this view's identity `endpoint`
        (a 403: a multi-doc endpoint that OpenSearch Security checks as a cluster action),
        now or within the last while, so that a refused caller is not asked again."""
        who = identity(self._headers)
        if (endpoint, who) in self._refused:
            return None
        try:
            return await call()
        except self._api_error as exc:
            if isinstance(exc, self._transport_error) or self._error_answer(exc)[0] != 403:
                raise  # no answer (an engine not reached), or not a refusal
            self._refused[endpoint, who] = True
            return None

    async def _one_or_error(self, index: str, body: Mapping[str, Any], named_scores: bool
                            ) -> dict[str, Any] | EngineError:
        try:
            return await self._search_one(index, body, named_scores)
        except self._api_error as exc:
            if isinstance(exc, self._transport_error):
                raise
            return EngineError(*self._error_answer(exc))

    def search_alongside(self, index: str, body: Mapping[str, Any]
                         ) -> asyncio.Future[dict[str, Any]]:
        """A search as written, with no URL parameter, sent in the round trip of the searches
        this view is asked for in this turn of the event loop (one `_msearch`): its answer
        to come, or the search's EngineError. No filter of this view is added."""
        return self._batch.submit(index, dict(body))
