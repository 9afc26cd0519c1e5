"""Contract clauses of ``complete_workflow`` / ``fail_workflow``: an operator
closes a live execution without running its code."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.replay.events import WorkflowClosedByOperator, encode_event
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from tests.store.workflow_helpers import finish, jobs_of, lease_task, snapshot, started


def _event(outcome: str, result: bytes | None = None) -> tuple[str, bytes]:
    raw = msgspec.Raw(b"null" if result is None else result)
    return encode_event(
        WorkflowClosedByOperator(outcome=outcome, result=raw, reason="by hand", closed_by="ann")
    )


async def _last_event_type(store: PostgresStore, wid: uuid.UUID) -> str:
    return str((await store.list_history(wid))[-1].type)


async def test_complete_ends_a_running_execution_succeeded_with_its_result(
    store: PostgresStore,
) -> None:
    wid = await started(store)  # its workflow task waits
    await store.complete_workflow(wid, b'{"paid":true}', "ann", _event("succeeded", b"{}"))
    view = await store.get_workflow_execution(wid)
    assert (view.state, bytes(view.result or b"")) == (WorkflowState.SUCCEEDED, b'{"paid":true}')
    assert view.completed_at is not None
    assert await _last_event_type(store, wid) == "WorkflowClosedByOperator"
    assert {j["state"] for j in await jobs_of(store, wid)} == {"cancelled"}


async def test_fail_ends_an_execution_failed_naming_who_and_why(store: PostgresStore) -> None:
    wid = await started(store)
    await store.fail_workflow(wid, "order voided", "ann", _event("failed"))
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.failure_reason) == (
        WorkflowState.FAILED,
        "failed by ann: order voided",
    )
    assert await _last_event_type(store, wid) == "WorkflowClosedByOperator"


async def test_close_takes_a_suspended_execution_and_fences_a_held_task(
    store: PostgresStore,
) -> None:
    held = await started(store)
    task = await lease_task(store, held)
    await store.fail_workflow(held, "stuck", "ann", _event("failed"))
    with pytest.raises(NotFoundError):  # the worker's lease no longer owns the task
        await store.ack(task.id, task.lease_token)  # type: ignore[arg-type]
    wid = await started(store)
    await store.suspend_workflow(wid, "hold")
    await store.complete_workflow(wid, b"1", "ann", _event("succeeded", b"1"))
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.SUCCEEDED


async def test_close_of_a_finished_or_missing_execution_is_not_found(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await finish(store, wid, ("fail", "boom"))
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="finished"):
        await store.complete_workflow(wid, b"1", "ann", _event("succeeded", b"1"))
    with pytest.raises(NotFoundError, match="finished"):
        await store.fail_workflow(wid, "again", "ann", _event("failed"))
    assert await snapshot(store, wid) == before
    with pytest.raises(NotFoundError, match="does not exist"):
        await store.fail_workflow(uuid.uuid4(), "x", "ann", _event("failed"))
