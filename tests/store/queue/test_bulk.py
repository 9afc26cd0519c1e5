"""Contract clauses of Store.EnqueueMany / TxStore.EnqueueManyTx against PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError
from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock
from tests.store.helpers import job, lease, row, stat_sums


async def _count(store: PostgresStore, table: str = "azync_jobs") -> int:
    return int(await store.pool.fetchval(f"SELECT count(*) FROM {table}"))


async def test_enqueue_many_writes_each_job_as_enqueue_would(store: PostgresStore) -> None:
    due = job(meta={"m": "\U0001f600"}, payload=b'{"a":[1,2]}')
    later = job("other", delay=timedelta(hours=1))
    at = job(run_at=datetime(2999, 1, 1, tzinfo=UTC), max_attempts=3, max_attempts_explicit=True)
    budget = job(snooze_budget=timedelta(minutes=5))
    assert await store.enqueue_many([due, later, at, budget]) == [True, True, True, True]
    db_now = await store.pool.fetchval("SELECT now()")
    first = await row(store, due.id)
    assert (first["state"], bytes(first["payload"])) == ("pending", b'{"a":[1,2]}')
    r = await row(store, later.id)
    assert (r["state"], r["kind"]) == ("scheduled", "other")
    assert abs(r["run_at"] - (db_now + timedelta(hours=1))) < timedelta(seconds=5)
    r = await row(store, at.id)
    assert (r["run_at"], r["max_attempts"], r["max_attempts_explicit"]) == (
        datetime(2999, 1, 1, tzinfo=UTC),
        3,
        True,
    )
    assert (await row(store, budget.id))["snooze_budget"] == timedelta(minutes=5)
    leased = await lease(store)
    assert {j.id for j in leased} == {due.id, budget.id}
    assert next(j for j in leased if j.id == due.id).meta == {"m": "\U0001f600"}
    assert (await stat_sums(store, "k"))["enqueued"] == 3
    assert (await stat_sums(store, "other"))["enqueued"] == 1


async def test_enqueue_many_of_nothing_writes_nothing(store: PostgresStore) -> None:
    assert await store.enqueue_many([]) == []
    assert await _count(store) == 0


async def test_enqueue_many_skips_items_whose_key_a_live_job_holds(store: PostgresStore) -> None:
    held = job(idempotency_key="K")
    assert await store.enqueue(held)
    dup, fresh, other_kind = job(idempotency_key="K"), job(), job("k2", idempotency_key="K")
    assert await store.enqueue_many([dup, fresh, other_kind]) == [False, True, True]
    assert await _count(store) == 3
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE id = $1", dup.id) == 0
    for leased in await lease(store):
        await store.ack(leased.id, leased.lease_token)  # a settled job frees its key
    assert await store.enqueue_many([job(idempotency_key="K")]) == [True]


async def test_enqueue_many_resolves_duplicates_within_the_batch_in_order(
    store: PostgresStore,
) -> None:
    items = [
        job(idempotency_key="A"),
        job(idempotency_key="A"),
        job(),
        job(),
        job(idempotency_key="B"),
        job("k2", idempotency_key="A"),
        job(idempotency_key="A"),
    ]
    assert await store.enqueue_many(items) == [True, False, True, True, True, True, False]
    kept = await store.pool.fetch("SELECT id FROM azync_jobs")
    assert {r["id"] for r in kept} == {items[i].id for i in (0, 2, 3, 4, 5)}
    assert (await stat_sums(store, "k"))["enqueued"] == 4


async def test_enqueue_many_honours_ttl_windows_and_reserves_them(
    store: PostgresStore, clock: MovableClock
) -> None:
    ttl = timedelta(minutes=10)
    first = job(idempotency_key="T", idempotency_ttl=ttl)
    assert await store.enqueue_many([first, job(idempotency_key="U")]) == [True, True]
    assert await _count(store, "azync_idempotency_keys") == 1  # only the TTL item reserves
    for leased in await lease(store):
        await store.ack(leased.id, leased.lease_token)
    # the window outlives the job; a key without a window is free again
    assert await store.enqueue_many([job(idempotency_key="T"), job(idempotency_key="U")]) == [
        False,
        True,
    ]
    clock.advance(ttl + timedelta(seconds=1))
    assert await store.enqueue_many([job(idempotency_key="T", idempotency_ttl=ttl)]) == [True]


async def test_enqueue_many_with_a_bad_item_writes_nothing(store: PostgresStore) -> None:
    good = job()
    for bad in (
        job("bad\x00kind"),
        job("x" * 256),
        job(idempotency_key="nul\x00"),
        job(meta={"k": "\x00"}),
        job(max_attempts=0, max_attempts_explicit=True),
    ):
        with pytest.raises(ValueError, match="EnqueueParams"):
            await store.enqueue_many([good, bad])
    assert await _count(store) == 0


async def test_enqueue_many_with_a_taken_or_repeated_id_is_a_conflict_writing_nothing(
    store: PostgresStore,
) -> None:
    taken = job()
    assert await store.enqueue(taken)
    with pytest.raises(ConflictError):
        await store.enqueue_many([job(), taken])
    twin = job()
    with pytest.raises(ConflictError):
        await store.enqueue_many([twin, job(), twin])
    assert await _count(store) == 1


async def test_enqueue_many_tx_rolls_back_with_the_callers_transaction(
    store: PostgresStore,
) -> None:
    items = [job(idempotency_key="R", idempotency_ttl=timedelta(hours=1)), job()]
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        assert await store.enqueue_many_tx(conn, items) == [True, True]
        assert await lease(store) == []  # not visible before commit
        await tx.rollback()
    assert await _count(store) == 0
    assert await _count(store, "azync_idempotency_keys") == 0
    assert (await stat_sums(store, "k"))["enqueued"] == 0
    assert await store.enqueue_many(items) == [True, True]


async def test_enqueue_many_tx_commits_with_the_callers_transaction(store: PostgresStore) -> None:
    items = [job(), job()]
    async with store.pool.acquire() as conn, conn.transaction():
        assert await store.enqueue_many_tx(conn, items) == [True, True]
    assert {j.id for j in await lease(store)} == {p.id for p in items}


async def test_enqueue_many_bulk_batch_round_trips(store: PostgresStore) -> None:
    items = [job(payload=f'{{"i":{i}}}'.encode()) for i in range(2000)]
    assert all(await store.enqueue_many(items))
    got = await store.pool.fetch("SELECT id, payload FROM azync_jobs")
    assert {(r["id"], bytes(r["payload"])) for r in got} == {(p.id, p.payload) for p in items}
