"""Lease expiry of workflow jobs: reaping workflow tasks and idempotent
operations, and generic job verbs respecting the one-runnable-task rule."""

from __future__ import annotations

from datetime import timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Job, Source
from azync_flow.store.workflows import SignalParams, WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    jobs_of,
    lease_op,
    lease_task,
    runnable_tasks,
    scheduled_op,
    started,
)

EXPIRE = LEASE + timedelta(seconds=1)


async def _leased_op(store: PostgresStore, idempotent: bool = True) -> Job:
    wid = await started(store)
    return await lease_op(store, await scheduled_op(store, wid, 1, idempotent=idempotent))


async def test_rescheduling_a_task_with_a_runnable_sibling_merges_into_it(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="mid-pass"))
    (sibling,) = await runnable_tasks(store, wid)
    await store.reschedule(task.id, task.lease_token, timedelta(seconds=10), "pass crashed")  # type: ignore[arg-type]
    (only,) = await runnable_tasks(store, wid)
    assert (only["id"], only["run_at"], only["state"]) == (
        sibling["id"],
        sibling["run_at"],
        "pending",
    )
    (mine,) = [j for j in await jobs_of(store, wid) if j["id"] == task.id]
    assert mine["state"] == "cancelled"
    assert str(sibling["id"]) in mine["last_error"]


async def test_rescheduling_a_task_alone_keeps_its_backoff(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.reschedule(task.id, task.lease_token, timedelta(seconds=10), "pass crashed")  # type: ignore[arg-type]
    (only,) = await runnable_tasks(store, wid)
    assert (only["id"], only["state"]) == (task.id, "scheduled")


async def test_reap_returns_expired_tasks_to_pending_then_suspends_a_poison_pass(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid = await started(store)
    task = await lease_task(store, wid)
    assert await store.reap_workflow_tasks(max_reaps=2) == (0, 0)  # not expired yet
    clock.advance(EXPIRE)
    assert await store.reap_workflow_tasks(max_reaps=2) == (1, 0)
    again = await lease_task(store, wid)
    assert (again.id, again.attempt, again.reap_count) == (task.id, 2, 1)
    clock.advance(EXPIRE)
    assert await store.reap_workflow_tasks(max_reaps=2) == (0, 1)
    (row,) = await jobs_of(store, wid)
    assert row["state"] == "dead"
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.SUSPENDED
    assert "lost its lease 2 times" in state.suspend_reason


async def test_reaping_a_task_while_a_signal_made_another_runnable_merges_them(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    clock.advance(EXPIRE)
    assert await store.reap_workflow_tasks() == (1, 0)
    (only,) = await runnable_tasks(store, wid)
    assert only["id"] != task.id


async def test_reap_requeues_expired_idempotent_operations_then_fails_them_in_history(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    op = await _leased_op(store)
    assert op.run_id is not None

    def encode(job: Job, reason: str) -> tuple[str, bytes]:
        return "ActivityFailed", f'{{"job":"{job.id}","why":"{reason}"}}'.encode()

    clock.advance(EXPIRE)
    assert await store.reap_expired_operations(encode, max_reaps=2) == (1, 0)
    (again,) = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
    )
    assert (again.id, again.attempt, again.reap_count) == (op.id, 2, 1)
    clock.advance(EXPIRE)
    assert await store.reap_expired_operations(encode, max_reaps=2) == (0, 1)
    (row,) = [j for j in await jobs_of(store, op.run_id) if j["id"] == op.id]
    assert (row["state"], row["last_error"]) == ("dead", "lease expired 2 times; giving up")
    (event,) = await store.list_history(op.run_id)
    assert event.type == "ActivityFailed"
    assert b"lease expired 2 times" in event.payload
    assert len(await runnable_tasks(store, op.run_id)) == 1


async def test_reap_of_operations_leaves_non_idempotent_ones_to_the_uncertain_reaper(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    op = await _leased_op(store, idempotent=False)
    clock.advance(EXPIRE)
    assert await store.reap_expired_operations(lambda j, r: ("F", b""), max_reaps=1) == (0, 0)
    assert op.run_id is not None
    (row,) = [j for j in await jobs_of(store, op.run_id) if j["id"] == op.id]
    assert row["state"] == "active"


async def test_generic_verbs_respect_the_one_task_rule_from_any_search_path(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    async with store.pool.acquire() as conn:
        await conn.execute("SET search_path TO public")
        try:  # an operator's session releasing the task by hand, schema-qualified
            await conn.execute(
                f"UPDATE \"{store.schema}\".azync_jobs SET state = 'pending' WHERE id = $1",
                task.id,
            )
        finally:
            await conn.execute(f'SET search_path TO "{store.schema}"')
    assert len(await runnable_tasks(store, wid)) == 1
