"""next_workflow_task_due: seconds until the earliest scheduled workflow task
of the served queues and names, on the backend clock."""

from __future__ import annotations

from datetime import timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import lease_task, started


async def test_next_due_is_the_earliest_scheduled_task_of_what_is_served(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    assert await store.next_workflow_task_due() is None  # nothing scheduled
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    await store.schedule_task(wid, "$wft", t0 + timedelta(seconds=90))
    assert await store.next_workflow_task_due() == 90.0
    clock.set(t0 + timedelta(seconds=100))
    assert await store.next_workflow_task_due() == -10.0  # overdue
    assert await store.next_workflow_task_due(names=["not_served"], task_queues=["x"]) is None
