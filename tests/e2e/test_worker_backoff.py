"""A lease loop whose dequeue fails backs off, however many wake-ups arrive."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import EnqueueParams, Source
from azync_flow.worker import Worker


async def _flood(store: PostgresStore, kind: str, seconds: float, at_least: int) -> int:
    """NOTIFY ``queue:<kind>`` on the store's channel about 200 times a second,
    for ``seconds`` and on until more than ``at_least`` were sent (a loaded
    machine sends fewer a second; the backoff keeps the failures few either way)."""
    sent = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    async with store.pool.acquire() as conn:
        while loop.time() < end or sent <= at_least:
            await conn.execute("SELECT pg_notify($1, $2)", store.channel, f"queue:{kind}")
            sent += 1
            await asyncio.sleep(0.005)
    return sent


async def test_failing_dequeue_keeps_its_backoff_under_a_flood_of_wakeups(
    store: PostgresStore,
) -> None:
    ran: list[Any] = []
    done = asyncio.Event()
    worker = Worker(
        store,
        poll_interval=timedelta(seconds=30),  # only wake-ups and the backoff drive the loop
        maintenance_interval=timedelta(seconds=30),
        handle_signals=False,
    )

    @worker.register("k")
    async def handle(payload: Any) -> None:
        ran.append(payload)
        done.set()

    async with worker:
        await worker.started()
        loop = worker.loops[(Source.QUEUE, "k")]
        # a broken column, not a missing table: a missing table is fatal
        # (SchemaNotMigratedError), this is an error the loop retries
        await store.pool.execute("ALTER TABLE azync_jobs RENAME COLUMN run_at TO run_at_gone")
        try:
            sent = await _flood(store, "k", 2.0, at_least=150)
            failures = loop.stats.errors
        finally:
            await store.pool.execute("ALTER TABLE azync_jobs RENAME COLUMN run_at_gone TO run_at")
        assert sent > 150
        # 0.05 s doubling: failures at about 0, 0.05, 0.15, 0.35, 0.75, 1.55, 3.15, 6.35 s
        assert 3 <= failures <= 8, failures
        # the loop recovers by itself once the store works again
        assert await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind="k", payload=b"1"))
        async with asyncio.timeout(10):
            await done.wait()
    assert ran == [1]
