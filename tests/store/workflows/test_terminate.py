"""``terminate_workflow`` in the workflow store: one fenced transaction that ends a
running or suspended execution, cancels its jobs (leased ones included, so their
holders lose the fence), its timers, appends the terminal event and publishes one
ledger event — real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.events import EventFilter, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import SignalParams, TerminatedExecution, WorkflowState
from tests.store.workflow_helpers import (
    commit_workflow_task,
    finish,
    jobs_of,
    lease_task,
    op_params,
    snapshot,
    started,
)

EVENT = ("WorkflowTerminated", b'{"type":"WorkflowTerminated","reason":"r"}')
TERMINATED = "azync.workflow.terminated"


async def _terminate(
    store: PostgresStore, wid: uuid.UUID, reason: str = "r"
) -> TerminatedExecution:
    return await store.terminate_workflow(wid, reason, "ops@host", EVENT)


async def test_terminate_ends_a_run_holding_a_leased_task_whose_commit_then_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    done = await _terminate(store, wid, "stuck")
    assert done.workflow_tasks == 1
    assert done.seq == 1
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError):
        await commit_workflow_task(
            store,
            task.id,
            task.lease_token,
            wid,
            1,
            events=[("ActivityScheduled", b'{"seq":1}')],
            operations=[op_params(wid, 1)],
        )
    assert await snapshot(store, wid) == before
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.TERMINATED
    assert view.failure_reason == "terminated by ops@host: stuck"
    history = await store.list_history(wid)
    assert [(h.seq, h.type, h.payload) for h in history] == [(1, *EVENT)]


async def test_terminate_a_suspended_run_cancels_its_uncertain_operation(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("ActivityScheduled", b'{"seq":1}')],
        operations=[op_params(wid, 1, idempotent=False)],
    )
    [op_id] = [j["id"] for j in await jobs_of(store, wid) if j["task_key"] != "$wft"]
    await store.pool.execute(  # parked uncertain, as the reaper leaves it
        "UPDATE azync_jobs SET state = 'uncertain', uncertain_reason = 'gateway timeout'"
        " WHERE id = $1",
        op_id,
    )
    await finish(store, wid, ("suspend", "uncertain operation"))
    done = await _terminate(store, wid)
    assert done.previous_state == "suspended"
    assert done.operations == [f"{wid}/1 $op:charge@1"]
    [op] = [j for j in await jobs_of(store, wid) if j["id"] == op_id]
    assert op["state"] == "cancelled"
    assert op["uncertain_reason"] == "gateway timeout"  # the audit trail stays
    assert await store.list_uncertain_operations(workflow_id=wid) == []
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.TERMINATED


async def test_terminate_publishes_one_ledger_event_fanned_out_to_subscribers(
    store: PostgresStore,
) -> None:
    await store.register_subscriber(Subscriber(name="audit", event_type=TERMINATED))
    wid = await started(store)
    await _terminate(store, wid, "bad input")
    rows, total = await store.list_events(EventFilter(type=TERMINATED), 0, 10)
    assert total == 1
    body = msgspec.json.decode(rows[0].payload)
    assert body == {
        "workflow_id": str(wid),
        "name": "order",
        "reason": "bad input",
        "terminated_by": "ops@host",
        "previous_state": "running",
        "cancelled_operations": [],
        "cancelled_timers": [],
    }
    assert rows[0].deliveries == 1


async def test_terminate_of_a_finished_or_missing_run_is_a_clear_error_and_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await finish(store, wid, ("complete", b'"done"'))
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="is succeeded \\(finished\\); cannot terminate"):
        await _terminate(store, wid)
    assert await snapshot(store, wid) == before
    with pytest.raises(NotFoundError, match="does not exist; cannot terminate"):
        await _terminate(store, uuid.uuid4())
    assert (await store.list_events(EventFilter(), 0, 10))[1] == 0


async def test_concurrent_terminates_end_the_run_once(store: PostgresStore) -> None:
    wid = await started(store)
    results = await asyncio.gather(
        *(_terminate(store, wid, f"r{i}") for i in range(5)), return_exceptions=True
    )
    ok = [r for r in results if not isinstance(r, BaseException)]
    assert len(ok) == 1
    assert all(isinstance(r, NotFoundError) for r in results if r not in ok), results
    assert [h.type for h in await store.list_history(wid)] == ["WorkflowTerminated"]
    assert (await store.list_events(EventFilter(type=TERMINATED), 0, 10))[1] == 1


async def test_a_terminated_run_is_vacuumed_like_other_finished_runs(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await _terminate(store, wid)
    await store.pool.execute(
        "UPDATE azync_workflow_executions SET completed_at = completed_at - interval '2 days'"
        " WHERE id = $1",
        wid,
    )
    assert await store.vacuum_workflows(timedelta(days=1)) == 1
    with pytest.raises(NotFoundError):
        await store.get_workflow_execution(wid)


async def test_terminate_records_signals_the_code_never_consumed_after_its_event(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    assert await store.signal_workflow(SignalParams(workflow_id=wid, name="go", message_id="m1"))
    done = await _terminate(store, wid)
    assert done.signals_undelivered == 1
    assert [h.type for h in await store.list_history(wid)] == [
        "WorkflowTerminated",
        "SignalsUndelivered",
    ]
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.signals_undelivered) == (WorkflowState.TERMINATED, 1)
    types = sorted(r.type for r in (await store.list_events(EventFilter(), 0, 10))[0])
    assert types == ["azync.workflow.signals_undelivered", TERMINATED]


async def test_signals_racing_a_terminate_are_accepted_or_refused_never_a_driver_error(
    store: PostgresStore,
) -> None:
    """Signals lock the execution before the runnable workflow task; terminate
    must take its locks in an order that cannot deadlock with them."""
    for round_ in range(10):
        wid = await started(store)

        async def send(i: int, wid: uuid.UUID = wid) -> bool | None:
            try:
                return await store.signal_workflow(
                    SignalParams(workflow_id=wid, name="go", message_id=f"m{i}")
                )
            except NotFoundError:
                return None  # refused: the run had finished

        results = await asyncio.gather(
            *(send(i) for i in range(10)),
            _terminate(store, wid, f"r{round_}"),
            *(send(i) for i in range(10, 20)),
        )
        done = results[10]
        assert isinstance(done, TerminatedExecution)
        accepted = sum(1 for r in results[:10] + results[11:] if r is True)
        assert done.signals_undelivered == accepted


async def test_terminate_waits_out_a_transaction_holding_a_job_then_ends_the_run(
    store: PostgresStore,
) -> None:
    """A job locked by another transaction (a worker settling it) makes terminate
    back off and retry, not wait on the lock (which could deadlock) nor fail."""
    wid = await started(store)
    task = await lease_task(store, wid)
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM azync_jobs WHERE id = $1 FOR UPDATE", task.id)
        ending = asyncio.create_task(_terminate(store, wid))
        await asyncio.sleep(0.3)
        assert not ending.done()
        assert (await store.get_workflow_execution(wid)).state == WorkflowState.RUNNING
    done = await asyncio.wait_for(ending, 5)
    assert done.workflow_tasks == 1
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.TERMINATED
