"""Signals accepted but never consumed are recorded on the finished execution, in
the completion's transaction (history event, count on the view, ledger event),
and a signal racing the completion commit is either recorded or refused as
"finished" — never accepted and lost. Real PostgreSQL, concurrent connections."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import msgspec
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.replay.events import SignalsUndelivered, decode_event
from azync_flow.store import Config
from azync_flow.store.events import EventFilter, Subscriber
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import SignalParams, WorkflowState
from tests.store import workflow_helpers
from tests.store.workflow_helpers import commit_workflow_task, lease_task, started

UNDELIVERED_EVENT = "azync.workflow.signals_undelivered"


def _signal(wid: uuid.UUID, message_id: str, name: str = "ev") -> SignalParams:
    return SignalParams(workflow_id=wid, name=name, payload=b'{"v":1}', message_id=message_id)


async def _undelivered(store: PostgresStore, wid: uuid.UUID) -> SignalsUndelivered:
    last = (await store.list_history(wid))[-1]
    event = decode_event(last.type, last.payload)
    assert isinstance(event, SignalsUndelivered)
    assert event.seq == last.seq
    return event


async def test_signal_accepted_after_the_pass_loaded_is_recorded_undelivered_at_completion(
    store: PostgresStore,
) -> None:
    await store.register_subscriber(Subscriber(name="audit", event_type=UNDELIVERED_EVENT))
    wid = await started(store)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    state = await store.load_workflow_task(wid)
    assert state.signals == []
    # accepted inside the completion window: the pass never saw it
    assert await store.signal_workflow(_signal(wid, "late-1"))
    seq = state.next_seq
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        seq,
        events=[("WorkflowCompleted", b'{"type":"WorkflowCompleted","seq":%d}' % seq)],
        outcome=("complete", b"1"),
    )
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.signals_undelivered) == (WorkflowState.SUCCEEDED, 1)
    event = await _undelivered(store, wid)
    assert event.seq == seq + 1  # after the outcome's event
    assert [(s.name, s.message_id) for s in event.signals] == [("ev", "late-1")]
    row = await store.pool.fetchrow(
        "SELECT id, consumed_seq FROM azync_workflow_signals WHERE workflow_id = $1", wid
    )
    assert (row["id"], row["consumed_seq"]) == (event.signals[0].signal_id, event.seq)
    events, total = await store.list_events(EventFilter(type=UNDELIVERED_EVENT), 0, 10)
    assert total == 1
    assert (events[0].aggregate_type, events[0].aggregate_id) == ("workflow", str(wid))
    assert events[0].deliveries == 1  # the subscriber got a delivery in the same transaction
    body = msgspec.json.decode(events[0].payload)
    assert (body["count"], body["state"], body["history_seq"]) == (1, "succeeded", event.seq)
    assert body["signals"][0]["message_id"] == "late-1"
    with pytest.raises(NotFoundError, match="finished"):
        await store.signal_workflow(_signal(wid, "after"))


async def test_no_undelivered_record_when_every_signal_was_consumed(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    assert await store.signal_workflow(_signal(wid, "m1"))
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    state = await store.load_workflow_task(wid)
    (sig,) = state.signals
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        state.next_seq,
        events=[("SignalReceived", b"{}"), ("WorkflowCompleted", b"{}")],
        consumed_signals=[(sig.signal_id, state.next_seq)],
        outcome=("complete", b"1"),
    )
    view = await store.get_workflow_execution(wid)
    assert view.signals_undelivered == 0
    assert [e.type for e in await store.list_history(wid)] == [
        "SignalReceived",
        "WorkflowCompleted",
    ]
    assert (await store.list_events(EventFilter(type=UNDELIVERED_EVENT), 0, 10))[1] == 0


async def _fail(store: PostgresStore, wid: uuid.UUID) -> None:
    await workflow_helpers.finish(store, wid, ("fail", "boom"))


async def _complete(store: PostgresStore, wid: uuid.UUID) -> None:
    await workflow_helpers.finish(store, wid, ("complete", b"1"))


async def _cancel_suspended(store: PostgresStore, wid: uuid.UUID) -> None:
    await workflow_helpers.finish(store, wid, ("suspend", "operator"))
    await store.cancel_workflow_execution(wid)


@pytest.mark.parametrize(
    ("finish", "state"),
    [
        (_complete, WorkflowState.SUCCEEDED),
        (_fail, WorkflowState.FAILED),
        (_cancel_suspended, WorkflowState.CANCELLED),
    ],
    ids=["complete", "fail", "cancel-suspended"],
)
async def test_every_terminal_verb_records_buffered_signals_undelivered(
    store: PostgresStore,
    finish: Callable[[PostgresStore, uuid.UUID], Awaitable[None]],
    state: WorkflowState,
) -> None:
    wid = await started(store)
    for i in range(3):
        assert await store.signal_workflow(_signal(wid, f"m{i}", name=f"s{i % 2}"))
    await finish(store, wid)
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.signals_undelivered) == (state, 3)
    event = await _undelivered(store, wid)
    assert [(s.name, s.message_id) for s in event.signals] == [
        ("s0", "m0"),
        ("s1", "m1"),
        ("s0", "m2"),
    ]
    left = await store.pool.fetchval(
        "SELECT count(*) FROM azync_workflow_signals WHERE workflow_id = $1"
        " AND consumed_seq IS NULL",
        wid,
    )
    assert left == 0


async def _blocked_by(store: PostgresStore, pid: int) -> int:
    """Wait until a backend waits on a lock held by backend ``pid``; its pid."""
    for _ in range(500):
        waiter = await store.pool.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid
        )
        if waiter is not None:
            return int(waiter)
        await asyncio.sleep(0.01)
    raise AssertionError(f"no backend ended up waiting on backend {pid}")


async def test_signal_racing_the_completion_commit_waits_and_is_refused_as_finished(
    store: PostgresStore, pg_dsn: str
) -> None:
    """The completing transaction holds the execution row while it is stalled (a
    test connection holds a row it must update); a signal sent meanwhile waits on
    that row and, once the completion commits, is refused — while the signal
    accepted before the completion took the row is recorded undelivered."""
    wid = await started(store)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    state = await store.load_workflow_task(wid)
    assert await store.signal_workflow(_signal(wid, "before"))  # schedules a runnable task
    other = await open_store(pg_dsn, Config(schema=store.schema), migrate=False)
    holder = await store.pool.acquire()
    try:
        tx = holder.transaction()
        await tx.start()
        holder_pid = await holder.fetchval("SELECT pg_backend_pid()")
        await holder.execute(
            "SELECT 1 FROM azync_jobs WHERE run_id = $1 AND state = 'pending' FOR UPDATE", wid
        )
        commit = asyncio.create_task(
            commit_workflow_task(
                other,
                task.id,
                task.lease_token,
                wid,
                state.next_seq,
                events=[("WorkflowCompleted", b"{}")],
                outcome=("complete", b"1"),
            )
        )
        # the completion waits on the held job row, holding the execution row
        completing_pid = await _blocked_by(store, holder_pid)
        racing = asyncio.create_task(store.signal_workflow(_signal(wid, "racing")))
        await _blocked_by(store, completing_pid)  # the signal waits for the completion
        await tx.rollback()
        await commit
        with pytest.raises(NotFoundError, match="finished"):
            await racing
    finally:
        await store.pool.release(holder)
        await other.close()
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.signals_undelivered) == (WorkflowState.SUCCEEDED, 1)
    event = await _undelivered(store, wid)
    assert [s.message_id for s in event.signals] == ["before"]
    ids = await store.pool.fetch(
        "SELECT message_id FROM azync_workflow_signals WHERE workflow_id = $1", wid
    )
    assert [r["message_id"] for r in ids] == ["before"]


async def test_suspension_records_the_seq_and_operation_it_concerns_until_resumed(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    state = await store.load_workflow_task(wid)
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        state.next_seq,
        outcome=("suspend", "at seq 3: history recorded X, code produced Y", 3),
    )
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.SUSPENDED
    assert view.suspend_reason == "at seq 3: history recorded X, code produced Y"
    assert (view.suspend_seq, view.suspend_operation_id) == (3, None)
    (listed,) = await store.list_workflow_executions(limit=10)
    assert (listed.suspend_reason, listed.suspend_seq) == (view.suspend_reason, 3)
    await store.resume_workflow(wid)
    view = await store.get_workflow_execution(wid)
    assert (view.suspend_reason, view.suspend_seq, view.suspend_operation_id) == ("", None, None)
