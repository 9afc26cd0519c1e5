"""Priorities in the workflow store (real PostgreSQL): workflow tasks are leased
by their execution's priority; the hot leases stay index scans on 100,000
rows."""

from __future__ import annotations

import uuid

import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowStartParams

from ..plans import DEQUEUE_ARGS, generic_plan, scans
from ..workflow_helpers import LEASE


async def test_workflow_tasks_are_leased_by_their_executions_priority(
    store: PostgresStore,
) -> None:
    ids = {}
    for p in (0, 7, -3, 2):
        params = WorkflowStartParams(id=uuid.uuid4(), name="order", input=b"1", priority=p)
        assert (await store.start_workflow(params))[0]
        ids[p] = params.id
        assert (await store.get_workflow_execution(params.id)).priority == p
    got = [t.job for t in await store.lease_workflow_tasks(10, LEASE)]
    assert [j.run_id for j in got] == [ids[7], ids[2], ids[0], ids[-3]]
    assert [j.priority for j in got] == [7, 2, 0, -3]


async def test_a_workflow_priority_out_of_range_is_refused(store: PostgresStore) -> None:
    params = WorkflowStartParams(id=uuid.uuid4(), name="order", input=b"1", priority=-10_001)
    with pytest.raises(ValueError, match="priority"):
        await store.start_workflow(params)


async def test_the_hot_leases_are_index_scans_on_100k_rows(store: PostgresStore) -> None:
    async with store.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,
                                       priority, payload)
               SELECT gen_random_uuid(), 'queue', 'k', 'pending',
                      now() - (g % 1000) * interval '1 second', now(), now(), g % 7 - 3, '1'
               FROM generate_series(1, 100000) g"""
        )
        await conn.execute(
            """INSERT INTO azync_workflow_executions (id, name, state, input, created_at,
                                                      updated_at)
               SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN 'elsewhere' ELSE 'mine' END,
                      'running', '1', now(), now()
               FROM generate_series(1, 100000) g"""
        )
        await conn.execute(
            """INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,
                                       run_id, task_key, workflow_name, first_pass)
               SELECT gen_random_uuid(), 'workflow', '$wft',
                      CASE WHEN e.name = 'mine' THEN 'scheduled' ELSE 'pending' END,
                      CASE WHEN e.name = 'mine' THEN now() + interval '7 days' ELSE now() END,
                      now(), now(), e.id, '$wft', e.name, e.name <> 'mine'
               FROM azync_workflow_executions e"""
        )
        await conn.execute("ANALYZE azync_jobs")
        queue = await generic_plan(conn, "azync_job_lease", DEQUEUE_ARGS)
        tasks = await generic_plan(
            conn,
            "azync_workflow_task_lease_load",
            [
                "NULL",
                "'$wft'",
                "10",
                "'30 seconds'",
                "'{}'",
                "'{}'",
                "true",
                "'{default}'",
                "'{mine}'",
                "'{}'",
            ],
        )
    assert ("Index Scan", "azync_jobs_ready") in scans(queue)
    assert all(t != "Seq Scan" and not t.startswith("Bitmap") for t, _ in scans(queue))
    task_scans = scans(tasks)
    assert ("Index Scan", "azync_jobs_workflow_task_due") in task_scans
    assert ("Index Scan", "azync_jobs_workflow_task_timed") in task_scans
    assert all(t != "Seq Scan" and not t.startswith("Bitmap") for t, _ in task_scans), task_scans
