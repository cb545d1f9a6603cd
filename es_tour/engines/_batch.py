"""Searches asked for in the same turn of the event loop, sent in one round trip."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from es_tour.errors import EngineError

SearchOne = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
# the answers of several (index, body) searches in order, each a dict or its own error
SearchMany = Callable[[Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[Sequence[Any]]]


class SearchBatch:
    """The searches one engine view is asked for in the same turn of the event loop, sent
    together: one alone as a search, several as one `_msearch`. A round's BM25 and kNN
    legs, gathered by its method, so cost one round trip, with no method knowing."""

    def __init__(self, search_one: SearchOne, search_many: SearchMany):
        self._search_one = search_one
        self._search_many = search_many
        self._pending: list[tuple[str, dict[str, Any], asyncio.Future[dict[str, Any]]]] = []

    async def search(self, index: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.submit(index, body)

    def submit(self, index: str, body: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """The answer to come of a search joined to this turn's round trip, at once."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((index, body, answer))
        if len(self._pending) == 1:
            # two turns: the tasks gathered beside this one reach their own call first
            loop.call_soon(loop.call_soon, self._send)
        return answer

    def _send(self) -> None:
        pending, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._answer(pending))
        task.add_done_callback(lambda done: done.exception())  # each error is its caller's

    async def _answer(self, pending: list[tuple[str, dict[str, Any],
                                               asyncio.Future[dict[str, Any]]]]) -> None:
        answers = [answer for *_, answer in pending]
        results: list[Any]  # each search's answer, or the error it gets
        try:
            if len(pending) == 1:
                index, body, _ = pending[0]
                results = [await self._search_one(index, body)]
            else:
                results = list(await self._search_many([(index, body)
                                                         for index, body, _ in pending]))
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
