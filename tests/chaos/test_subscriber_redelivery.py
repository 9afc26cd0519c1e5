"""Redelivery is bounded by what was in flight: a SIGKILLed subscriber process
gets again at most its in-flight deliveries (its concurrency), even when the
database is slow to take its acks; a live subscriber whose acks are slow gets
no delivery twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from azync_flow import attach_subscribers
from azync_flow.client import Client
from azync_flow.events import register_subscribers
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from tests.chaos._subscriber_recorder import EVENT, SEEN_TABLE, recorder_for, slow_acks

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_subscriber_kill_app.py")
CONCURRENCY = 10  # the app's
FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}


async def setup(store: PostgresStore, events: int, lease: timedelta) -> None:
    await store.pool.execute(SEEN_TABLE)
    await register_subscribers(store, [recorder_for(store, CONCURRENCY, lease)])
    client = Client(store)
    for i in range(events):
        await client.publish(EVENT, {"i": i})


async def seen(store: PostgresStore) -> tuple[int, int]:
    """(deliveries recorded, distinct events recorded)."""
    row = await store.pool.fetchrow("SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM seen")
    assert row is not None
    return int(row["n"]), int(row["d"])


async def run_until_all_succeeded(worker: Worker, store: PostgresStore, events: int) -> None:
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(90):
            while True:
                done = await store.pool.fetchval(
                    "SELECT count(*) FROM azync_jobs"
                    " WHERE kind = 'recorder' AND state = 'succeeded'"
                )
                if done >= events:
                    break
                await asyncio.sleep(0.1)
    finally:
        worker.shutdown()
        await task


async def test_sigkilled_subscriber_redelivers_at_most_its_in_flight_deliveries(
    store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    events = 300
    await setup(store, events, timedelta(seconds=2))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ACK_DELAY_": "0.3"},
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            assert (await proc.stdout.readline()).strip() == b"ready"
            while True:  # killed once 60 deliveries have had their effect
                if (await seen(store))[0] >= 60:
                    break
                await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    worker = Worker(store, **FAST)
    attach_subscribers(worker, [recorder_for(store, CONCURRENCY, timedelta(seconds=2))])
    await run_until_all_succeeded(worker, store, events)

    total, distinct = await seen(store)
    assert distinct == events
    assert total - distinct <= CONCURRENCY


async def test_live_subscriber_with_slow_acks_gets_no_delivery_twice(
    store: PostgresStore,
) -> None:
    events = 60
    lease = timedelta(seconds=1)
    await setup(store, events, lease)
    slow_acks(store, 1.5)  # every ack waits longer than the lease
    worker = Worker(store, **FAST)
    attach_subscribers(worker, [recorder_for(store, CONCURRENCY, lease)])
    await run_until_all_succeeded(worker, store, events)

    assert await seen(store) == (events, events)
    assert worker.acks.stale == 0
