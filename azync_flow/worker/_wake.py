"""Fan one wake-up subscription out to the worker's loops.

One LISTEN connection per worker (the store's ``wake()`` stream); each wake
``(source, kind)`` pokes the loop leasing that partition. When the store is
poll-only (``wake()`` returns None) or the subscription cannot be opened, the
loops still poll every ``poll_interval``, which is the correctness path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..store.queue import Source, Wake

if TYPE_CHECKING:
    from ..store import Subscription
    from ._store import WorkerStore

__all__ = ["WakeHub"]

log = logging.getLogger("azync_flow.worker")


class WakeHub:
    """Routes store wake-ups to per-partition callbacks."""

    def __init__(self, store: WorkerStore) -> None:
        self.store = store
        self.routes: dict[tuple[Source, str], Callable[[], None]] = {}
        self.received = 0
        self._stream: Subscription[Wake] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        """True while push wake-ups are subscribed (False: polling only)."""
        return self._stream is not None

    def route(self, source: Source, kind: str, poke: Callable[[], None]) -> None:
        self.routes[(source, kind)] = poke

    async def start(self) -> None:
        """Subscribe; when this returns, a job committed afterwards is announced."""
        try:
            self._stream = await self.store.wake()
        except Exception as exc:
            log.warning("push wake-ups unavailable (%s); polling only", exc)
            self._stream = None
        if self._stream is not None:
            self._task = asyncio.create_task(self._pump(self._stream), name="azync wake hub")

    async def _pump(self, stream: Subscription[Wake]) -> None:
        async for wake in stream:
            self.received += 1
            poke = self.routes.get((wake.source, wake.kind))
            if poke is not None:
                poke()

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
