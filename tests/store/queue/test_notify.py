"""Contract clauses of Notifier.Wake: LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow.store import Config, default_channel
from azync_flow.store.events import PublishParams, Subscriber
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.postgres.queue import WakeSubscription
from azync_flow.store.queue import Source, Wake
from azync_flow.testing import MovableClock, drop_schema, unique_schema
from tests.store.helpers import eventually, job, lease


@pytest.fixture
async def nstore(pg_dsn: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    """A store on its own schema AND its own channel, so no other test's wakes leak in."""
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, notify_channel=f"w_{schema}"), clock=clock)
    try:
        yield s
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)


async def _next(sub: WakeSubscription) -> Wake:
    async with asyncio.timeout(5):
        return await anext(sub)


async def _nothing_within(sub: WakeSubscription, seconds: float = 0.3) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await anext(sub)
    except TimeoutError:
        return True
    return False


async def test_wake_per_committed_enqueue_by_source_and_kind(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert sub is not None
    async with sub:
        await nstore.enqueue(job("alpha"))
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="alpha")
        await nstore.enqueue(job("beta:with:colons"))
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="beta:with:colons")
        await nstore.enqueue(job("later", delay=timedelta(hours=1)))  # not due: no wake
        assert await _nothing_within(sub)


async def test_wake_fires_on_commit_not_before_and_not_on_rollback(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert sub is not None
    async with sub, nstore.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        await nstore.enqueue_tx(conn, job("rolled"))
        assert await _nothing_within(sub)
        await tx.rollback()
        assert await _nothing_within(sub)
        tx = conn.transaction()
        await tx.start()
        await nstore.enqueue_tx(conn, job("kept"))
        assert await _nothing_within(sub)
        await tx.commit()
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="kept")


async def test_enqueue_many_wakes_each_due_kind_on_commit(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert sub is not None
    async with sub:
        await nstore.enqueue_many(
            [job("a"), job("a"), job("b"), job("later", delay=timedelta(hours=1))]
        )
        got = {await _next(sub), await _next(sub)}
        assert got == {Wake(source=Source.QUEUE, kind="a"), Wake(source=Source.QUEUE, kind="b")}
        assert await _nothing_within(sub)  # "later" is not due


async def test_wake_is_none_when_poll_only(pg_dsn: str) -> None:
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, poll_only=True))
    try:
        assert await s.wake() is None
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)


async def test_wake_survives_listener_backend_terminated(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert isinstance(sub, WakeSubscription)
    async with sub:
        listener = await nstore.pool.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE query = $1",
            f'LISTEN "{nstore.channel}"',
        )
        assert listener is not None
        assert await nstore.pool.fetchval("SELECT pg_terminate_backend($1)", listener)
        # enqueued while the listener is down: replayed after the reconnect
        await nstore.enqueue(job("during"))
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="during")

        async def reconnected() -> bool:
            return sub.reconnects >= 1

        await eventually(reconnected)
        (j,) = await lease(nstore, "during")
        await nstore.ack(j.id, j.lease_token)
        await nstore.enqueue(job("after"))  # the re-established LISTEN hears this one
        # the old session may still have heard "during" before it died, so the
        # replay can repeat it: a duplicate wake is harmless, a lost one is not
        seen = [await _next(sub)]
        while seen[-1].kind != "after":
            seen.append(await _next(sub))
        assert {w.kind for w in seen} <= {"during", "after"}


async def test_promote_due_and_reap_wake_their_kinds(
    nstore: PostgresStore, clock: MovableClock
) -> None:
    sub = await nstore.wake()
    assert sub is not None
    async with sub:
        await nstore.enqueue(job("timer", delay=timedelta(minutes=1)))
        await nstore.enqueue(job("lease"))
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="lease")
        await lease(nstore, "lease")
        clock.advance(timedelta(minutes=2))
        assert await nstore.promote_due(Source.QUEUE) == 1
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="timer")
        assert await nstore.reap_expired(Source.QUEUE, None, 5) == (1, 0)
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="lease")


async def test_wake_iteration_ends_after_close(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert sub is not None
    waiter = asyncio.create_task(anext(sub))
    await asyncio.sleep(0.05)
    await sub.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiter, 2)
    await sub.close()  # idempotent


async def test_publish_run_now_and_retry_wake_their_partitions(nstore: PostgresStore) -> None:
    sub = await nstore.wake()
    assert sub is not None
    async with sub:
        for name in ("billing", "shipping"):
            await nstore.register_subscriber(Subscriber(name=name, event_type="t"))
        await nstore.publish(PublishParams(id=uuid.uuid4(), type="t", payload=b"{}"))
        got = {await _next(sub), await _next(sub)}
        assert got == {Wake(source=Source.EVENT, kind=k) for k in ("billing", "shipping")}
        later = job("later", delay=timedelta(days=1))
        await nstore.enqueue(later)
        await nstore.run_now(Source.QUEUE, later.id)
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="later")
        (j,) = await lease(nstore, "later")
        await nstore.dead(j.id, j.lease_token, "x")
        await nstore.retry_job(Source.QUEUE, j.id)
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="later")
        (j,) = await lease(nstore, "later")
        await nstore.dead(j.id, j.lease_token, "x")
        assert await nstore.retry_all_dead(Source.QUEUE, "") == 1
        assert await _next(sub) == Wake(source=Source.QUEUE, kind="later")


async def test_default_channel_is_per_schema_so_schemas_never_wake_each_other(
    pg_dsn: str,
) -> None:
    schemas = [unique_schema(), unique_schema()]
    a, b = [await open_store(pg_dsn, Config(schema=s)) for s in schemas]
    try:
        assert a.channel == f"azync_wake_{schemas[0]}"
        assert a.channel != b.channel
        sub_a, sub_b = await a.wake(), await b.wake()
        assert sub_a is not None
        assert sub_b is not None
        async with sub_a, sub_b:
            for _ in range(20):
                await a.enqueue(job("alpha"))
            assert await _next(sub_a) == Wake(source=Source.QUEUE, kind="alpha")
            assert await _nothing_within(sub_b)
            await b.enqueue(job("beta"))
            assert await _next(sub_b) == Wake(source=Source.QUEUE, kind="beta")
    finally:
        for s, name in zip((a, b), schemas, strict=True):
            await s.close()
            await drop_schema(pg_dsn, name)


def test_default_channel_of_a_long_schema_name_fits_an_identifier() -> None:
    long_a, long_b = "s" * 63, "s" * 62 + "t"
    assert len(default_channel(long_a)) <= 63
    assert default_channel(long_a) != default_channel(long_b)
    assert default_channel(long_a) == default_channel(long_a)
