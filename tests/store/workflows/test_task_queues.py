"""Task queues in the workflow store (real PostgreSQL): the workflow task lease
takes only the workflow names and task queues it serves, in the lease
statement; a worker that cannot run a task leaves it with the reason kept;
the worker registry says which runs no live worker serves."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowStartParams, WorkflowState

from ..helpers import row
from ..workflow_helpers import LEASE


async def _start(store: PostgresStore, name: str, queue: str = "default") -> uuid.UUID:
    p = WorkflowStartParams(id=uuid.uuid4(), name=name, input=b"1", task_queue=queue)
    inserted, wid = await store.start_workflow(p)
    assert inserted
    return wid


async def test_a_workflow_task_lease_takes_only_the_names_and_queues_it_serves(
    store: PostgresStore,
) -> None:
    mine = await _start(store, "order", "a")
    other_name = await _start(store, "invoice", "a")
    other_queue = await _start(store, "order", "b")
    got = await store.lease_workflow_tasks(10, LEASE, task_queues=["a"], names=["order"])
    assert [t.job.run_id for t in got] == [mine]
    assert got[0].job.task_queue == "a"
    rest = await store.lease_workflow_tasks(10, LEASE)  # None: any name, any queue
    assert {t.job.run_id for t in rest} == {other_name, other_queue}


async def test_a_workflow_task_lease_leaves_the_executions_it_excludes(
    store: PostgresStore,
) -> None:
    left, taken = await _start(store, "order"), await _start(store, "order")
    got = await store.lease_workflow_tasks(
        10, LEASE, task_queues=["default"], names=["order"], exclude=[left]
    )
    assert [t.job.run_id for t in got] == [taken]


async def test_a_workflow_task_released_blocked_keeps_its_run_running_and_says_why(
    store: PostgresStore,
) -> None:
    wid = await _start(store, "order")
    (leased,) = await store.lease_workflow_tasks(1, LEASE)
    task = leased.job
    assert task.lease_token is not None
    await store.release_blocked(task.id, task.lease_token, "cannot decode its input")
    r = await row(store, task.id)
    assert (r["state"], r["attempt"], r["blocked_reason"]) == (
        "pending",
        0,
        "cannot decode its input",
    )
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.RUNNING
    assert "cannot decode its input" in view.blocked_reason
    with pytest.raises(NotFoundError):
        await store.release_blocked(task.id, task.lease_token, "again")


async def test_describe_says_when_no_live_worker_serves_the_run_on_its_queue(
    store: PostgresStore,
) -> None:
    wid = await _start(store, "order", "gpu")
    want = "no live worker serves workflow 'order' on task queue 'gpu'"
    assert (await store.get_workflow_execution(wid)).blocked_reason == want
    assert await store.list_unserved_workflows() == [("gpu", "order")]
    worker = uuid.uuid4()
    await store.register_worker(worker, ["order"], timedelta(minutes=1), task_queues=["default"])
    assert await store.live_workers_for_workflow("order", "gpu") == 0
    assert (await store.get_workflow_execution(wid)).blocked_reason == want
    await store.register_worker(
        worker, ["order"], timedelta(minutes=1), task_queues=["default", "gpu"]
    )
    assert await store.live_workers_for_workflow("order", "gpu") == 1
    assert (await store.get_workflow_execution(wid)).blocked_reason == ""
    assert await store.list_unserved_workflows() == []
    (listed,) = await store.list_workflow_executions()
    assert listed.blocked_reason == ""


async def test_the_unserved_pairs_are_each_distinct_pair_once(store: PostgresStore) -> None:
    for name, queue in [("b", "q1"), ("a", "q1"), ("a", "q1"), ("a", "q0"), ("c", "q2")]:
        await _start(store, name, queue)
    await store.register_worker(uuid.uuid4(), ["c"], timedelta(minutes=1), task_queues=["q2"])
    assert await store.list_unserved_workflows() == [("q0", "a"), ("q1", "a"), ("q1", "b")]
