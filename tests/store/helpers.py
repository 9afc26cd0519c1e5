"""Shared helpers of the store contract tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import asyncpg

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, EnqueueParams, Job, Source

LEASE = timedelta(seconds=30)


def job(kind: str = "k", **kw: Any) -> EnqueueParams:
    """Enqueue params with a fresh id and a small JSON payload."""
    kw.setdefault("payload", b'{"x":1}')
    return EnqueueParams(id=uuid.uuid4(), kind=kind, **kw)


async def lease(
    store: PostgresStore,
    kind: str = "k",
    limit: int = 10,
    source: Source = Source.QUEUE,
    lease_for: timedelta = LEASE,
    **kw: Any,
) -> list[Job]:
    return await store.dequeue_batch(
        source, DequeueParams(kind=kind, limit=limit, lease=lease_for, **kw)
    )


async def enqueue_and_lease(store: PostgresStore, kind: str = "k", **kw: Any) -> Job:
    """Enqueue one due job of ``kind`` and lease it."""
    assert await store.enqueue(job(kind, **kw))
    (leased,) = await lease(store, kind)
    return leased


async def row(store: PostgresStore, id: uuid.UUID) -> asyncpg.Record:
    """The raw jobs row, read directly (independent of the verbs under test)."""
    r = await store.pool.fetchrow("SELECT * FROM azync_jobs WHERE id = $1", id)
    assert r is not None
    return r


async def attempts(store: PostgresStore, id: uuid.UUID) -> list[tuple[int, str]]:
    rows = await store.pool.fetch(
        "SELECT attempt, error FROM azync_job_attempts WHERE job_id = $1 ORDER BY id", id
    )
    return [(r["attempt"], r["error"]) for r in rows]


async def stat_sums(store: PostgresStore, kind: str, source: Source = Source.QUEUE) -> dict:
    """The kind's counters summed over the daily window, read through ``stats``."""
    _, daily = await store.stats(source, kind)
    return {
        col: sum(getattr(d, col) for d in daily)
        for col in ("enqueued", "processed", "failed", "reaped")
    }


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Poll ``check`` until it returns True; fail after ``within`` seconds."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - polls external state, no event exists
            await asyncio.sleep(0.02)
