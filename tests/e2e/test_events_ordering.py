"""Per-key ordered subscribers on real workers: the events of one key are
delivered one at a time in publish order, through retries and across workers,
while different keys run in parallel; an unordered subscriber gives no order."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest

from azync_flow import attach_subscribers
from azync_flow.client import Client
from azync_flow.events import EventContext, register_subscribers, subscriber
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.worker import Worker

FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}
#: long enough that an unordered subscriber runs the next event during the backoff
BACKOFF = RetryPolicy(initial_interval=timedelta(milliseconds=300), jitter=0.0)
KEYS = ["k0", "k1", "k2", "k3"]
PER_KEY = 5


@pytest.fixture
async def second_store(pg_dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    """Another store (its own pool) on the test's schema: a second worker process's view."""
    store = await open_store(pg_dsn, Config(schema=schema))
    try:
        yield store
    finally:
        await store.close()


async def run_workers(workers: list[Worker], done: asyncio.Event) -> None:
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        async with asyncio.timeout(60):
            await done.wait()
    finally:
        for w in workers:
            w.shutdown()
        await asyncio.gather(*tasks)


async def publish_interleaved(client: Client, pg_dsn: str, schema: str) -> None:
    """Events 0..PER_KEY-1 of every key, keys interleaved; events 2 and 3 of
    each key go out in one transaction (same publish time)."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        for n in range(PER_KEY):
            if n == 2:
                async with conn.transaction():
                    for key in KEYS:
                        for m in (2, 3):
                            await client.publish("tick", {"n": m}, key=key, conn=conn)
                continue
            if n == 3:
                continue
            for key in KEYS:
                await client.publish("tick", {"n": n}, key=key)
    finally:
        await conn.close()


async def test_ordered_subscriber_delivers_each_keys_events_in_publish_order_through_retries(
    store: PostgresStore, second_store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    seen: dict[str, list[int]] = defaultdict(list)
    unordered_seen: dict[str, list[int]] = defaultdict(list)
    running: dict[str, int] = defaultdict(int)
    overlap: list[str] = []
    done = asyncio.Event()

    def finished() -> None:
        total = sum(len(v) for v in seen.values()) + sum(len(v) for v in unordered_seen.values())
        if total == 2 * len(KEYS) * PER_KEY:
            done.set()

    @subscriber("tick", name="ordered", ordering="key", retry=BACKOFF, concurrency=10)
    async def ordered(payload: dict[str, int], ctx: EventContext) -> None:
        running[ctx.key] += 1
        if running[ctx.key] > 1:
            overlap.append(ctx.key)
        try:
            await asyncio.sleep(0.01)
            if payload["n"] == 1 and ctx.attempt == 1:
                raise ConnectionError("first attempt of event 1 fails")
            seen[ctx.key].append(payload["n"])
        finally:
            running[ctx.key] -= 1
        finished()

    @subscriber("tick", name="unordered", retry=BACKOFF, concurrency=10)
    async def unordered(payload: dict[str, int], ctx: EventContext) -> None:
        if payload["n"] == 1 and ctx.attempt == 1:
            raise ConnectionError("first attempt of event 1 fails")
        unordered_seen[ctx.key].append(payload["n"])
        finished()

    await register_subscribers(store, [ordered, unordered])
    await publish_interleaved(Client(store), pg_dsn, schema)
    workers = [Worker(store, **FAST), Worker(second_store, **FAST)]
    for w in workers:
        attach_subscribers(w, [ordered, unordered])
    await run_workers(workers, done)

    assert dict(seen) == {key: list(range(PER_KEY)) for key in KEYS}
    assert overlap == []
    # without ordering the retried event 1 is overtaken by the later ones
    assert all(unordered_seen[key][-1] == 1 for key in KEYS), dict(unordered_seen)


async def test_ordered_subscriber_runs_different_keys_in_parallel(
    store: PostgresStore, second_store: PostgresStore
) -> None:
    started: dict[str, asyncio.Event] = {key: asyncio.Event() for key in ("a", "b")}
    order: dict[str, list[int]] = defaultdict(list)
    done = asyncio.Event()

    @subscriber("step", name="paired", ordering="key", concurrency=4)
    async def paired(payload: dict[str, int], ctx: EventContext) -> None:
        other = "b" if ctx.key == "a" else "a"
        if payload["n"] == 0:
            started[ctx.key].set()
            # both keys' first events are in flight at once, or this times out
            async with asyncio.timeout(20):
                await started[other].wait()
        order[ctx.key].append(payload["n"])
        if sum(len(v) for v in order.values()) == 6:
            done.set()

    await register_subscribers(store, [paired])
    client = Client(store)
    for n in range(3):
        for key in ("a", "b"):
            await client.publish("step", {"n": n}, key=key)
    workers = [Worker(store, **FAST), Worker(second_store, **FAST)]
    for w in workers:
        attach_subscribers(w, [paired])
    await run_workers(workers, done)

    assert dict(order) == {"a": [0, 1, 2], "b": [0, 1, 2]}
    rows = await store.pool.fetch(
        f'SELECT state FROM "{store.schema}".azync_jobs WHERE kind = $1', "paired"
    )
    assert {r["state"] for r in rows} == {"succeeded"}
