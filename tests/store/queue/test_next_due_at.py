"""next_due_at: the earliest moment after the store's clock at which a job or a
workflow timer becomes due — what time skipping jumps to."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import EnqueueParams
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import lease_task, started

T0 = datetime(2031, 5, 1, tzinfo=UTC)


async def enqueue(store: PostgresStore, delay: timedelta) -> None:
    await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind="k", payload=b"{}", delay=delay))


async def test_nothing_waiting_on_time_is_none(store: PostgresStore, clock: MovableClock) -> None:
    clock.set(T0)
    assert await store.next_due_at() is None
    await enqueue(store, timedelta(0))  # runnable now: not waiting on time
    assert await store.next_due_at() is None


async def test_the_earliest_future_job_counts_and_passed_ones_do_not(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    await enqueue(store, timedelta(days=3))
    await enqueue(store, timedelta(hours=5))
    assert await store.next_due_at() == T0 + timedelta(hours=5)
    clock.set(T0 + timedelta(hours=5))  # due now, no longer in the future
    assert await store.next_due_at() == T0 + timedelta(days=3)
    clock.set(T0 + timedelta(days=4))
    assert await store.next_due_at() is None


async def test_a_future_workflow_task_and_an_unfired_timer_count(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    await store.schedule_task(wid, "$wft", T0 + timedelta(days=30))
    assert await store.next_due_at() == T0 + timedelta(days=30)
    await store.pool.execute(
        "INSERT INTO azync_workflow_timers (workflow_id, seq, fire_at) VALUES ($1, 9, $2)",
        wid,
        T0 + timedelta(days=2),
    )
    assert await store.next_due_at() == T0 + timedelta(days=2)
