"""Contract clauses of Store.Enqueue / EnqueueTx / DequeueBatch / Ack against PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.events import PublishParams, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, JobState, Source
from azync_flow.testing import MovableClock
from tests.store.helpers import LEASE, job, lease, row


async def test_enqueue_due_job_is_pending_and_delayed_job_scheduled(store: PostgresStore) -> None:
    due, later = job(), job(delay=timedelta(hours=1))
    at = job(run_at=datetime(2999, 1, 1, tzinfo=UTC))
    for p in (due, later, at):
        assert await store.enqueue(p)
    db_now = await store.pool.fetchval("SELECT now()")
    assert (await row(store, due.id))["state"] == "pending"
    r = await row(store, later.id)
    assert r["state"] == "scheduled"
    assert abs(r["run_at"] - (db_now + timedelta(hours=1))) < timedelta(seconds=5)
    assert (await row(store, at.id))["run_at"] == datetime(2999, 1, 1, tzinfo=UTC)


async def test_enqueue_payload_round_trips_byte_for_byte(store: PostgresStore) -> None:
    payloads = [
        b'{"s":"a\\u0000b","z":1,"a":2}',
        '{"astral":"\U0001f600","deep":[[[[[[[[[]]]]]]]]]}'.encode(),
        b'{"big":"' + b"x" * (10 * 1024 * 1024) + b'"}',
    ]
    for i, payload in enumerate(payloads):
        assert await store.enqueue(job(f"k{i}", payload=payload, meta={"m": "\U0001f600"}))
        (leased,) = await lease(store, f"k{i}")
        assert leased.payload == payload
        assert leased.meta == {"m": "\U0001f600"}


async def test_enqueue_same_id_twice_is_a_conflict(store: PostgresStore) -> None:
    p = job()
    assert await store.enqueue(p)
    with pytest.raises(ConflictError):
        await store.enqueue(p)


async def test_enqueue_live_key_rejects_until_settled(store: PostgresStore) -> None:
    first = job(idempotency_key="K")
    assert await store.enqueue(first)
    assert not await store.enqueue(job(idempotency_key="K"))  # pending
    assert await store.enqueue(job("other", idempotency_key="K"))  # key is per kind
    (leased,) = await lease(store)
    assert not await store.enqueue(job(idempotency_key="K"))  # active
    await store.ack(leased.id, leased.lease_token)
    again = job(idempotency_key="K")
    assert await store.enqueue(again)  # settled: key freed
    (leased,) = await lease(store)
    await store.dead(leased.id, leased.lease_token, "boom")
    assert await store.enqueue(job(idempotency_key="K"))  # dead frees it too
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE kind = 'k'") == 3


async def test_enqueue_ttl_key_survives_ack(store: PostgresStore, clock: MovableClock) -> None:
    ttl = timedelta(minutes=10)
    first = job(idempotency_key="T", idempotency_ttl=ttl)
    assert await store.enqueue(first)
    (leased,) = await lease(store)
    await store.ack(leased.id, leased.lease_token)
    assert not await store.enqueue(job(idempotency_key="T", idempotency_ttl=ttl))
    assert not await store.enqueue(job(idempotency_key="T"))  # the window binds every enqueue
    clock.advance(ttl + timedelta(seconds=1))
    assert await store.enqueue(job(idempotency_key="T", idempotency_ttl=ttl))


async def test_enqueue_deduplicated_by_live_job_does_not_reserve_ttl_window(
    store: PostgresStore, clock: MovableClock
) -> None:
    assert await store.enqueue(job(idempotency_key="L"))
    assert not await store.enqueue(job(idempotency_key="L", idempotency_ttl=timedelta(hours=1)))
    assert await store.pool.fetchval("SELECT count(*) FROM azync_idempotency_keys") == 0


async def test_enqueue_tx_commits_with_callers_transaction(store: PostgresStore) -> None:
    p = job()
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        assert await store.enqueue_tx(conn, p)
        await conn.execute("CREATE TEMP TABLE marker (x int)")  # the caller's own work
        assert await lease(store) == []  # not visible before commit
        await tx.commit()
    (leased,) = await lease(store)
    assert leased.id == p.id


async def test_enqueue_tx_rolls_back_with_callers_transaction(store: PostgresStore) -> None:
    p = job(idempotency_key="R", idempotency_ttl=timedelta(hours=1))
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        assert await store.enqueue_tx(conn, p)
        await tx.rollback()
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 0
    assert await store.pool.fetchval("SELECT count(*) FROM azync_idempotency_keys") == 0
    assert await store.enqueue(job(idempotency_key="R", idempotency_ttl=timedelta(hours=1)))


async def test_dequeue_increments_attempt_and_mints_token(store: PostgresStore) -> None:
    p = job()
    assert await store.enqueue(p)
    params = DequeueParams(kind="k", limit=10, lease=LEASE)
    (first,) = await store.dequeue_batch(Source.QUEUE, params)
    assert (first.id, first.state, first.attempt) == (p.id, JobState.ACTIVE, 1)
    assert first.payload == b'{"x":1}'
    assert first.started_at is not None
    assert first.event is None
    assert await store.dequeue_batch(Source.QUEUE, params) == []
    await store.release(first.id, first.lease_token)
    (second,) = await store.dequeue_batch(Source.QUEUE, params)
    assert second.lease_token not in (None, first.lease_token)


async def test_dequeue_of_event_deliveries_carries_the_event(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="billing", event_type="order.placed"))
    p = PublishParams(
        id=uuid.uuid4(),
        type="order.placed",
        payload=b'{"order":7}',
        aggregate_type="order",
        aggregate_id="7",
        meta={"source": "shop"},
    )
    assert await store.publish(p) == 1
    params = DequeueParams(kind="billing", limit=10, lease=LEASE)
    (delivery,) = await store.dequeue_batch(Source.EVENT, params)
    assert (delivery.source, delivery.kind, delivery.event_id) == (Source.EVENT, "billing", p.id)
    assert delivery.event is not None
    assert (delivery.event.id, delivery.event.type, delivery.event.payload) == (
        p.id,
        "order.placed",
        b'{"order":7}',
    )
    assert (delivery.event.aggregate_type, delivery.event.aggregate_id) == ("order", "7")
    assert delivery.event.meta == {"source": "shop"}
    assert await store.dequeue_batch(Source.EVENT, params) == []


async def test_dequeue_of_a_nonpositive_limit_leases_nothing(store: PostgresStore) -> None:
    p = job()
    await store.enqueue(p)
    for limit in (0, -1):
        params = DequeueParams(kind="k", limit=limit, lease=LEASE)
        assert await store.dequeue_batch(Source.QUEUE, params) == []
    r = await row(store, p.id)
    assert (r["state"], r["attempt"], r["lease_token"]) == ("pending", 0, None)


async def test_dequeue_orders_by_run_at_then_id_and_respects_limit(
    store: PostgresStore,
) -> None:
    base = datetime.now(UTC) - timedelta(hours=1)
    ids = sorted(uuid.uuid4() for _ in range(4))
    # two share a run_at (tie broken by id), one is older, one is not due
    await store.enqueue(_with_id(ids[3], base))
    await store.enqueue(_with_id(ids[1], base))
    await store.enqueue(_with_id(ids[2], base - timedelta(minutes=5)))
    await store.enqueue(_with_id(ids[0], datetime.now(UTC) + timedelta(hours=1)))
    got = await lease(store, limit=2)
    assert [j.id for j in got] == [ids[2], ids[1]]
    got = await lease(store, limit=5)
    assert [j.id for j in got] == [ids[3]]
    assert await lease(store, limit=0) == []


def _with_id(id: uuid.UUID, run_at: datetime):
    p = job(run_at=run_at)
    p.id = id
    return p


async def test_dequeue_skip_locked_concurrent_leases_are_disjoint(store: PostgresStore) -> None:
    for _ in range(200):
        await store.enqueue(job())
    batches = await asyncio.gather(*(lease(store, limit=30) for _ in range(8)))
    ids = [j.id for b in batches for j in b]
    assert len(ids) == len(set(ids)) == 200


async def test_dequeue_resolves_default_max_attempts_on_first_lease_only(
    store: PostgresStore,
) -> None:
    p = job(max_attempts=3)
    await store.enqueue(p)
    (j,) = await lease(store, default_max_attempts=7)
    assert j.max_attempts == 7
    await store.snooze(j.id, j.lease_token, timedelta(0), "")
    await store.promote_due(Source.QUEUE)
    (j,) = await lease(store, default_max_attempts=9)
    assert j.max_attempts == 7  # durable: a later lease with another default keeps it


async def test_dequeue_keeps_explicit_max_attempts(store: PostgresStore) -> None:
    await store.enqueue(job(max_attempts=3, max_attempts_explicit=True))
    (j,) = await lease(store, default_max_attempts=7)
    assert j.max_attempts == 3
    assert (await row(store, j.id))["max_attempts"] == 3


async def test_dequeue_without_override_keeps_stored_max_attempts(store: PostgresStore) -> None:
    await store.enqueue(job(max_attempts=4))
    await store.enqueue(job("zero"))
    (j,) = await lease(store, default_max_attempts=7, override_default=False)
    assert j.max_attempts == 4
    (z,) = await lease(store, "zero", default_max_attempts=7, override_default=False)
    assert z.max_attempts == 7  # nothing stored: the default fills the gap


async def test_dequeue_leases_only_its_source_and_kind(store: PostgresStore) -> None:
    await store.enqueue(job("a"))
    assert await lease(store, "b") == []
    assert await lease(store, "a", source=Source.DAG) == []
    assert len(await lease(store, "a")) == 1


async def test_dequeue_lease_times_come_from_the_statement_clock(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.enqueue(job())
    t = clock.advance(timedelta(days=3))
    (j,) = await lease(store)
    assert j.lease_until == t + LEASE
    assert j.started_at == t


async def test_ack_retains_job_as_succeeded(store: PostgresStore) -> None:
    await store.enqueue(job())
    (j,) = await lease(store)
    await store.ack(j.id, j.lease_token)
    r = await row(store, j.id)
    assert r["state"] == "succeeded"
    assert r["completed_at"] is not None
    assert r["lease_until"] is None
    with pytest.raises(NotFoundError):
        await store.ack(j.id, j.lease_token)


async def test_ack_many_acks_current_pairs_and_skips_stale(store: PostgresStore) -> None:
    for _ in range(3):
        await store.enqueue(job())
    a, b, c = await lease(store)
    pairs = [(a.id, a.lease_token), (b.id, uuid.uuid4()), (c.id, c.lease_token)]
    done = await store.ack_many(pairs)
    assert done == {a.id, c.id}
    assert (await row(store, b.id))["state"] == "active"
    assert await store.ack_many([]) == set()
