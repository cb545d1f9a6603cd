"""The refined path's own event loop, on a thread of its own.

A refined search is many small pieces of Python on an event loop: building and decoding
the engine's answers, fusion, provenance. On the loop that accepts connections, every
pass-through request would wait behind them. Here they run on a second loop, so the
serving loop only relays bytes and awaits the refinement's answer; the two threads still
share the GIL, which Python hands over every switch interval (`SWITCH_INTERVAL_S`).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
# how long a thread holding the GIL may keep it while another waits (Python's default is
# 5 ms): the most a pass-through request waits for the refinement thread at a time
SWITCH_INTERVAL_S = 0.001


class RefineLoop:
    """An event loop on a daemon thread, started at its first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
                loop = _new_loop()
                self._thread = threading.Thread(target=loop.run_forever, daemon=True,
                                                name="es-tour-refine")
                self._thread.start()
                self._loop = loop
            return self._loop

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """`work`'s result, run on the refinement loop; cancelling the caller cancels it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._running()))

    async def close(self, last: Coroutine[Any, Any, None] | None = None) -> None:
        """Run `last` there (closing what lives on that loop), then stop the loop."""
        if self._loop is None:
            if last is not None:
                last.close()
            return
        if last is not None:
            await self.run(last)
        loop, thread = self._loop, self._thread
        loop.call_soon_threadsafe(loop.stop)
        assert thread is not None
        await asyncio.to_thread(thread.join)
        loop.close()
        self._loop = self._thread = None


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's, where installed (the serving loop's too), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
