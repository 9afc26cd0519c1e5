"""A workflow-task lease says whether it left a due task behind (``more_due``).

A worker whose lease took everything due sleeps until woken instead of leasing
again at once; so the answer must be False only when no task the caller could
lease was left: not when the batch was full, and not when a concurrent lease
held the lock of a due task and the statement skipped it.
"""

from __future__ import annotations

import asyncpg

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import SignalParams
from tests.store.workflow_helpers import LEASE, started


async def test_a_lease_that_takes_every_due_task_left_none(store: PostgresStore) -> None:
    for _ in range(3):
        await started(store)
    tasks = await store.lease_workflow_tasks(10, LEASE)
    assert len(tasks) == 3
    assert [t.more_due for t in tasks] == [False, False, False]


async def test_a_full_batch_leaves_the_rest_due(store: PostgresStore) -> None:
    for _ in range(3):
        await started(store)
    first = await store.lease_workflow_tasks(2, LEASE)
    assert len(first) == 2
    assert all(t.more_due for t in first)
    rest = await store.lease_workflow_tasks(2, LEASE)
    assert len(rest) == 1
    assert not rest[0].more_due


async def test_a_due_task_locked_by_a_concurrent_lease_is_left_due(
    store: PostgresStore, azync_dsn: str, schema: str
) -> None:
    locked = await started(store)
    free = await started(store)
    other: asyncpg.Connection = await asyncpg.connect(
        azync_dsn, server_settings={"search_path": schema}
    )
    try:
        async with other.transaction():
            await other.execute(
                "SELECT 1 FROM azync_jobs WHERE run_id = $1 AND task_key = '$wft' FOR UPDATE",
                locked,
            )
            tasks = await store.lease_workflow_tasks(10, LEASE)
            assert [t.job.run_id for t in tasks] == [free]
            assert tasks[0].more_due
    finally:
        await other.close()
    after = await store.lease_workflow_tasks(10, LEASE)
    assert [t.job.run_id for t in after] == [locked]
    assert not after[0].more_due


async def test_a_task_waiting_for_its_runs_pass_is_not_left_due(store: PostgresStore) -> None:
    # A task made due while a pass of its run is active cannot be leased until
    # that pass commits (which wakes it), so it does not keep a lease going.
    busy = await started(store)
    [running] = await store.lease_workflow_tasks(10, LEASE)
    assert running.job.run_id == busy
    assert await store.signal_workflow(
        SignalParams(workflow_id=busy, name="go", payload=b'"x"', message_id="m1")
    )
    new = await started(store)
    tasks = await store.lease_workflow_tasks(10, LEASE)
    assert [t.job.run_id for t in tasks] == [new]
    assert not tasks[0].more_due


async def test_tasks_of_names_the_caller_does_not_serve_are_not_left_due(
    store: PostgresStore,
) -> None:
    await started(store, name="invoice")
    mine = await started(store, name="order")
    tasks = await store.lease_workflow_tasks(10, LEASE, task_queues=["default"], names=["order"])
    assert [t.job.run_id for t in tasks] == [mine]
    assert not tasks[0].more_due
