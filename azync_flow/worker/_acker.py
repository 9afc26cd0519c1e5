"""Group-commit of acks: many finished jobs settled by one ``ack_many`` statement.

A runner that finished a job hands ``(id, lease_token)`` to :meth:`AckBatcher.ack`
and awaits the returned future; a flusher task writes everything queued so far
in one statement while the next batch accumulates, so the batch size follows
the load with no added latency when the load is light.

The runner holds its slot (and its lease, renewed by the loop's heartbeats)
until the ack is committed: a worker never has more jobs run but not yet acked
than its concurrency, so a crash re-runs at most its in-flight jobs, and an ack
that waits on a slow database never outlives its lease.

Safety: the job's effect happened before its ack is queued. If the process dies
before the flush commits, the lease expires, the job is reaped and runs again —
at-least-once, never lost. A token gone stale in the meantime (the job was
reaped) is skipped by ``ack_many`` and counted in :attr:`AckBatcher.stale`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING

from .._logging import log_failure

if TYPE_CHECKING:
    from ._store import WorkerStore

__all__ = ["AckBatcher"]

log = logging.getLogger("azync_flow.worker")


class AckBatcher:
    """Batches acks of finished jobs into ``store.ack_many`` calls.

    Args:
        store: the store to ack in.
        max_batch: most acks per statement.
        flushers: statements allowed in flight at once.
    """

    def __init__(self, store: WorkerStore, *, max_batch: int = 500, flushers: int = 2) -> None:
        self.store = store
        self.max_batch = max_batch
        self.acked = 0
        self.stale = 0
        self._buffer: list[tuple[uuid.UUID, uuid.UUID, asyncio.Future[bool]]] = []
        self._ready = asyncio.Event()
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._flushers = flushers
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def pending(self) -> int:
        """Acks queued or being written."""
        return len(self._buffer) + self._inflight

    def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> asyncio.Future[bool]:
        """Queue the ack of a finished job.

        Returns:
            A future resolved once the ack statement carrying it has run: True
            when the job was acked, False when its token was stale or the ack
            was given up (the job then runs again after its lease). Await it
            to hold the job's slot and lease until the ack is durable.
        """
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._buffer.append((id, lease_token, done))
        self._idle.clear()
        self._ready.set()
        if not self._tasks:
            self.start()
        return done

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._flusher(), name=f"ack flusher {i}")
                for i in range(self._flushers)
            ]

    async def _flusher(self) -> None:
        while True:
            await self._ready.wait()
            if not self._buffer:
                self._ready.clear()
                continue
            batch = self._buffer[: self.max_batch]
            del self._buffer[: self.max_batch]
            if not self._buffer:
                self._ready.clear()
            self._inflight += len(batch)
            acked: set[uuid.UUID] = set()
            try:
                acked = await self._write([(id, token) for id, token, _ in batch])
            finally:
                for id, _, done in batch:
                    if not done.done():
                        done.set_result(id in acked)
                self._inflight -= len(batch)
                if not self._buffer and not self._inflight:
                    self._idle.set()

    async def _write(self, batch: list[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
        """Ack ``batch``, retrying failed statements; returns the ids acked."""
        delay = 0.05
        for _ in range(8):
            try:
                done = await self.store.ack_many(batch)
            except Exception as exc:
                log_failure(
                    log,
                    exc,
                    "ack of %d jobs failed; retrying in %.2fs",
                    len(batch),
                    delay,
                    level=logging.WARNING,
                    traceback=False,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self.acked += len(done)
            if len(done) < len(batch):
                self.stale += len(batch) - len(done)
                log.warning(
                    "%d acks were stale (lease lost, job reaped); those jobs run again",
                    len(batch) - len(done),
                )
            return set(done)
        log.error("giving up acking %d jobs; their leases expire and they run again", len(batch))
        return set()

    async def flush(self) -> None:
        """Wait until every ack queued so far is written (or given up)."""
        if self._buffer and not self._tasks:
            self.start()
        await self._idle.wait()

    async def close(self) -> None:
        """Flush, then stop the flusher tasks."""
        await self.flush()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
