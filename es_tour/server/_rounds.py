"""The rounds of a planned search: admission to a refinement slot, the method's ranking of
the window under the search's deadline, and round 0 once the deadline has passed.

At most `max_refinements` searches refine at once; the others wait for a slot until their
deadline (and then answer with the round-0 ranking) or, with `when_full: reject`, get a
429 at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from es_tour.errors import OverloadedError, UpstreamTimeoutError
from es_tour.pipeline import BUDGET_OPTIONS, SearchResult
from es_tour.server._config import ServerConfig
from es_tour.server._options import build
from es_tour.server._plan import RefinePlan
from es_tour.server._stats import Stats

FALLBACK = "knn"  # round 0 of every method: the query's nearest neighbours
# past the deadline, the round-0 call gets this long: an engine that is restarting can
# accept a connection and not answer, and the caller was promised an answer by now
FALLBACK_TIMEOUT_MS = 1_000


@dataclass(frozen=True)
class Ranked:
    """A search's ranking: the method's, or past the deadline round 0's with the
    fallback's name; `window` the ids of its first hits, in order, that es-tour orders."""

    result: SearchResult
    fallback: str | None
    window: list[str]


class Rounds:
    """The refinement slots every search of one sidecar shares, and the ranking in them."""

    def __init__(self, config: ServerConfig, stats: Stats):
        self._config = config
        self._stats = stats
        self._slots = asyncio.Semaphore(config.max_refinements)

    @asynccontextmanager
    async def admitted(self) -> AsyncIterator[bool]:
        """A search let in: with `when_full: reject`, it holds a slot from now until the
        answer is fetched (True), or gets a 429 when none is free; else each ranking waits
        for its own slot (False)."""
        if self._config.when_full != "reject":
            yield False
            return
        if self._slots.locked():
            self._stats.rejected.inc()
            raise OverloadedError(
                f"all {self._config.max_refinements} refinement slots are busy; retry later",
                self._config.retry_after_s)
        # a free slot is taken without suspending: no other request checks in between
        await self._slots.acquire()
        try:
            yield True
        finally:
            self._slots.release()

    async def rank(self, plan: RefinePlan, holding: bool) -> Ranked:
        """The method's ranking of the whole window, whatever the page (every page of one
        search is cut from one ranking); past the deadline, round 0's."""
        depth = plan.chosen.window
        try:
            result = await asyncio.wait_for(self._refine(plan, holding), plan.deadline_ms / 1000)
            fallback = None
        except TimeoutError:
            result, fallback = await self._round0(plan), FALLBACK
        return Ranked(result, fallback, [hit.id for hit in result.hits[:depth]])

    async def _refine(self, plan: RefinePlan, holding: bool) -> SearchResult:
        """The method's search once a slot is free (or in the slot the search `holding`
        took); cancelled at the deadline, between two labeler batches at the latest (the
        batch running finishes on its thread)."""
        if holding:
            return await self._search(plan)
        self._stats.queue.inc()
        try:
            await self._slots.acquire()
        finally:  # a request cancelled at its deadline while waiting leaves the queue too
            self._stats.queue.dec()
        try:
            return await self._search(plan)
        finally:
            self._slots.release()

    @staticmethod
    async def _search(plan: RefinePlan) -> SearchResult:
        """The method's search; a labelling method's labeler embeds the query meanwhile."""
        if plan.chosen.method not in BUDGET_OPTIONS:
            return await plan.method.search(plan.text, plan.chosen.window)
        ahead = asyncio.ensure_future(plan.context.embed_labeler_query(plan.text))
        try:
            return await plan.method.search(plan.text, plan.chosen.window)
        finally:
            settle(ahead)  # an error of its, labelling met too

    async def _round0(self, plan: RefinePlan) -> SearchResult:
        """The kNN ranking the method starts from, marked degraded, named for the method.

        Its one model call, the query embedding, has a thread of its own in the pool."""
        chosen, depth = plan.chosen, plan.chosen.window
        k = max(depth, int(chosen.options.get("k", depth)), 1)
        try:
            result = await asyncio.wait_for(
                build(FALLBACK, plan.context, {"k": k}, by_id=False).search(plan.text, depth),
                FALLBACK_TIMEOUT_MS / 1000)
        except TimeoutError:
            raise UpstreamTimeoutError(
                f"the refinement passed its deadline and the engine did not answer the round-0 "
                f"search within {FALLBACK_TIMEOUT_MS} ms more") from None
        return SearchResult(chosen.method, result.hits, result.rounds, result.pairs_scored,
                            result.engine_calls, result.timings, dict(chosen.options),
                            degraded=True)


def settle(*tasks: asyncio.Future[Any]) -> None:
    """Cancel the tasks still running; read the error of those that failed, so that one
    another answered first is not left unread."""
    for task in tasks:
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()
