"""Task-queue limits of activity operations in the workflow store (real
PostgreSQL): operations of different activities on a limited task queue, leased
by their pass (local dispatch), share the queue's capacity; the rest wait
pending for the limited lease, and describe says which limit they wait for;
operations on another queue are leased locally as before."""

from __future__ import annotations

import uuid

import msgspec

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Job, LimitSpec, Source
from azync_flow.store.workflows import OperationLease, PassWrite
from tests.store.workflow_helpers import LEASE, lease_task, op_params, started

GPU = LimitSpec(name="gpu", type="concurrency", capacity=2)


async def _pass(
    store: PostgresStore, activities: list[str], task_queue: str
) -> tuple[uuid.UUID, list[Job]]:
    """A first pass scheduling one call of each activity on ``task_queue``, all claimed locally."""
    wid = await started(store)
    task = await lease_task(store, wid)
    ops = [
        msgspec.structs.replace(op_params(wid, s, activity=a), task_queue=task_queue)
        for s, a in enumerate(activities, start=1)
    ]
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}") for _ in ops],
        operations=ops,
        local=OperationLease(
            keys=[o.execution_key for o in ops], lease=LEASE, default_max_attempts=3
        ),
    )
    assert task.lease_token is not None
    result = await store.commit_pass(task.id, task.lease_token, wid, write)
    return wid, result.leased


async def _lease(store: PostgresStore, activity: str) -> list[Job]:
    return await store.dequeue_batch(
        Source.WORKFLOW,
        DequeueParams(kind=f"$op:{activity}@1", limit=5, lease=LEASE, task_queues=("gpu",)),
    )


async def test_local_operations_of_two_activities_share_their_task_queues_capacity(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", GPU)
    wid, leased = await _pass(store, ["render", "train", "render", "train"], "gpu")
    assert sorted(j.kind for j in leased) == ["$op:render@1", "$op:train@1"]
    assert await _lease(store, "render") == []
    assert await _lease(store, "train") == []
    view = await store.get_workflow_execution(wid)
    assert "waits for concurrency limit 'gpu' of task queue 'gpu'" in view.blocked_reason
    first = leased[0]
    assert first.lease_token is not None
    await store.ack(first.id, first.lease_token)
    again = await _lease(store, "render") + await _lease(store, "train")
    assert len(again) == 1


async def test_operations_on_another_task_queue_are_leased_locally_as_before(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", GPU)
    _, leased = await _pass(store, ["render", "train", "render", "train"], "default")
    assert len(leased) == 4
    assert all(j.limit_key is None for j in leased)
