"""Contract clauses of ``suspend_workflow`` (an operator's pause) and its resume."""

from __future__ import annotations

import uuid

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import SignalParams, WorkflowState
from tests.store.workflow_helpers import (
    LEASE,
    finish,
    lease_task,
    runnable_tasks,
    snapshot,
    started,
)


async def test_suspend_holds_a_running_execution_without_a_runnable_task(
    store: PostgresStore,
) -> None:
    wid = await started(store)  # its first workflow task waits
    assert len(await runnable_tasks(store, wid)) == 1
    await store.suspend_workflow(wid, "vendor outage")
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.SUSPENDED
    assert view.suspend_reason == "suspended by an operator: vendor outage"
    assert await runnable_tasks(store, wid) == []
    assert await store.lease_workflow_tasks(100, LEASE) == []


async def test_a_signal_to_an_operator_suspended_execution_waits_for_resume(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await store.suspend_workflow(wid, "hold")
    assert await store.signal_workflow(SignalParams(workflow_id=wid, name="go"))
    assert await runnable_tasks(store, wid) == []  # buffered, no pass
    await store.resume_workflow(wid)
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.suspend_reason) == (WorkflowState.RUNNING, "")
    task = await lease_task(store, wid)
    assert task.run_id == wid


async def test_suspend_refuses_while_a_pass_runs_and_changes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="running a workflow task now"):
        await store.suspend_workflow(wid, "hold")
    assert await snapshot(store, wid) == before
    await store.ack(task.id, task.lease_token)  # type: ignore[arg-type]
    await store.suspend_workflow(wid, "hold")  # no pass now: taken
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.SUSPENDED


async def test_suspend_of_a_suspended_finished_or_missing_execution_is_not_found(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await store.suspend_workflow(wid, "first")
    with pytest.raises(NotFoundError, match="is suspended; cannot suspend"):
        await store.suspend_workflow(wid, "again")
    assert (await store.get_workflow_execution(wid)).suspend_reason.endswith(": first")
    done = await started(store)
    await finish(store, done, ("fail", "boom"))
    with pytest.raises(NotFoundError, match="finished"):
        await store.suspend_workflow(done, "late")
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match="does not exist"):
        await store.suspend_workflow(missing, "who")


@pytest.mark.parametrize("reason", ["", "   ", "a\x00b"])
async def test_suspend_refuses_an_empty_or_unstorable_reason(
    store: PostgresStore, reason: str
) -> None:
    wid = await started(store)
    with pytest.raises(ValueError, match="reason"):
        await store.suspend_workflow(wid, reason)
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.RUNNING
