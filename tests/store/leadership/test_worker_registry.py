"""Contract clauses of WorkerRegistryStore: each worker's own row, live for its
TTL on the store's clock, counted per registered workflow."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock


async def _row(store: PostgresStore, worker_id: uuid.UUID) -> dict[str, object] | None:
    r = await store.pool.fetchrow("SELECT * FROM azync_workers WHERE id = $1", worker_id)
    return None if r is None else dict(r)


async def test_a_registered_worker_counts_for_each_of_its_workflows_until_its_ttl(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    a, b = uuid.uuid4(), uuid.uuid4()
    await store.register_worker(a, ["order", "refund"], timedelta(seconds=30), host="h1", pid=7)
    await store.register_worker(b, ["order"], timedelta(seconds=10))
    assert await store.live_workers_for_workflow("order") == 2
    assert await store.live_workers_for_workflow("refund") == 1
    assert await store.live_workers_for_workflow("ship") == 0
    row = await _row(store, a)
    assert row is not None
    assert (row["host"], row["pid"], row["expires_at"]) == ("h1", 7, t0 + timedelta(seconds=30))
    clock.set(t0 + timedelta(seconds=10))  # b's expiry passed: it no longer counts
    assert await store.live_workers_for_workflow("order") == 1
    clock.set(t0 + timedelta(seconds=30))
    assert await store.live_workers_for_workflow("order") == 0
    assert await _row(store, a) is not None  # a lapsed row stays; it just stops counting


async def test_registering_again_refreshes_the_expiry_and_replaces_the_workflows(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    w = uuid.uuid4()
    await store.register_worker(w, ["order"], timedelta(seconds=10))
    clock.set(t0 + timedelta(seconds=8))
    await store.register_worker(w, ["refund", "refund"], timedelta(seconds=10))
    clock.set(t0 + timedelta(seconds=15))  # past the first expiry, within the refreshed one
    assert await store.live_workers_for_workflow("refund") == 1
    assert await store.live_workers_for_workflow("order") == 0
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workers") == 1  # one row
    row = await _row(store, w)
    assert row is not None
    assert (row["workflows"], row["expires_at"]) == (["refund"], t0 + timedelta(seconds=18))


async def test_unregistering_removes_only_that_worker_and_is_idempotent(
    store: PostgresStore,
) -> None:
    stopping, staying = uuid.uuid4(), uuid.uuid4()
    for w in (stopping, staying):
        await store.register_worker(w, ["order"], timedelta(minutes=1))
    await store.unregister_worker(stopping)
    assert await _row(store, stopping) is None
    assert await store.live_workers_for_workflow("order") == 1
    await store.unregister_worker(stopping)  # already gone: no error
    await store.unregister_worker(uuid.uuid4())
    assert await store.live_workers_for_workflow("order") == 1
