"""Hot-path verbs of the workflow store on real PostgreSQL: operations leased in a
pass's commit, an operation's completion committed with the next pass, a start
committed with its first pass, and lease + load of workflow tasks in one
statement — each fenced, each writing nothing when a fence fails."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import OperationLease, OperationSettle, PassWrite, SignalParams
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    commit,
    jobs_of,
    lease_task,
    op_params,
    runnable_tasks,
    snapshot,
    start_params,
    started,
)


def local(*keys: str, lease: timedelta = LEASE) -> OperationLease:
    return OperationLease(keys=list(keys), lease=lease, default_max_attempts=7)


async def leased_op(store: PostgresStore, clock: MovableClock) -> tuple[uuid.UUID, object]:
    """A running execution whose first pass leased operation seq 1 to the caller."""
    wid = await started(store)
    task = await lease_task(store, wid)
    op = op_params(wid, 1)
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}")],
        operations=[op],
        local=local(op.execution_key),
    )
    assert task.lease_token is not None
    result = await store.commit_pass(task.id, task.lease_token, wid, write)
    [job] = result.leased
    return wid, job


async def test_pass_commit_inserts_named_operations_leased_to_the_caller(
    store: PostgresStore, clock: MovableClock
) -> None:
    at = clock.advance(timedelta(0))
    wid = await started(store)
    task = await lease_task(store, wid)
    mine, other = op_params(wid, 1), op_params(wid, 2, activity="ship")
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}"), ("ActivityScheduled", b"{}")],
        operations=[mine, other],
        local=local(mine.execution_key),
    )
    assert task.lease_token is not None
    result = await store.commit_pass(task.id, task.lease_token, wid, write)
    [job] = result.leased
    assert (job.kind, job.attempt, job.max_attempts, job.run_id) == ("$op:charge@1", 1, 7, wid)
    assert job.lease_token is not None
    assert job.lease_until == at + LEASE  # the backend (overridden) clock
    rows = {r["task_key"]: r for r in await jobs_of(store, wid)}
    assert rows[mine.execution_key]["state"] == "active"
    assert rows[mine.execution_key]["lease_token"] == job.lease_token
    assert rows[other.execution_key]["state"] == "pending"  # not named: any worker dequeues it
    assert result.next_seq == 3
    await store.extend_lease(job.id, job.lease_token, LEASE)  # a real lease: renewable


async def test_completion_commits_ack_outcome_and_next_pass_in_one_transaction(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    nxt = op_params(wid, 3)
    write = PassWrite(
        expected_next_seq=2,
        events=[("ActivityScheduled", b'{"n":3}')],
        operations=[nxt],
        local=local(nxt.execution_key),
    )
    settle = OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=job.lease_token,  # type: ignore[attr-defined]
        event_type="ActivityCompleted",
        payload=b'{"r":1}',
    )
    result = await store.commit_completions(wid, [settle], write)
    assert result.next_seq == 4
    assert [j.task_key for j in result.leased] == [nxt.execution_key]
    history = await store.list_history(wid)
    assert [(e.seq, e.type, e.payload) for e in history] == [
        (1, "ActivityScheduled", b"{}"),
        (2, "ActivityCompleted", b'{"r":1}'),
        (3, "ActivityScheduled", b'{"n":3}'),
    ]
    states = {r["task_key"]: r["state"] for r in await jobs_of(store, wid)}
    assert states[f"{wid}/1"] == "succeeded"
    assert states[nxt.execution_key] == "active"
    assert await runnable_tasks(store, wid) == []  # no workflow task carried this pass


async def test_completion_with_a_stale_token_writes_nothing(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    before = await snapshot(store, wid)
    settle = OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=uuid.uuid4(),
        event_type="ActivityCompleted",
        payload=b"1",
    )
    with pytest.raises(NotFoundError):
        await store.commit_completions(wid, [settle], PassWrite(expected_next_seq=2))
    assert await snapshot(store, wid) == before


async def test_completion_whose_seq_moved_writes_nothing(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    await store.append_history(wid, "Marker", b"{}")  # another writer moves next_seq
    before = await snapshot(store, wid)
    settle = OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=job.lease_token,  # type: ignore[attr-defined]
        event_type="ActivityCompleted",
        payload=b"1",
    )
    with pytest.raises(ConflictError):
        await store.commit_completions(wid, [settle], PassWrite(expected_next_seq=2))
    assert await snapshot(store, wid) == before
    # the plain path still records it
    assert (
        await store.complete_operation(job.id, job.lease_token, wid, "ActivityCompleted", b"1") == 3
    )  # type: ignore[attr-defined]


async def test_completion_of_a_dead_operation_dead_letters_it(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    settle = OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=job.lease_token,  # type: ignore[attr-defined]
        event_type="ActivityFailed",
        payload=b"{}",
        dead=True,
        last_error="boom\x00",
    )
    await store.commit_completions(
        wid, [settle], PassWrite(expected_next_seq=2, outcome=("fail", "ValueError: boom"))
    )
    [op] = [r for r in await jobs_of(store, wid) if r["task_key"] != "$wft"]
    assert (op["state"], op["last_error"]) == ("dead", "boom\\x00")
    assert (await store.get_workflow_execution(wid)).state == "failed"


async def test_folded_pass_leaving_a_signal_buffered_schedules_a_task_now(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    assert await store.signal_workflow(SignalParams(workflow_id=wid, name="go"))
    [pending] = await runnable_tasks(store, wid)
    await store.pool.execute(
        "UPDATE azync_jobs SET state = 'cancelled' WHERE id = $1", pending["id"]
    )
    settle = OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=job.lease_token,  # type: ignore[attr-defined]
        event_type="ActivityCompleted",
        payload=b"1",
    )
    await store.commit_completions(wid, [settle], PassWrite(expected_next_seq=2))
    [task] = await runnable_tasks(store, wid)
    assert task["state"] == "pending"  # the signal is not left without a pass


async def test_start_with_first_pass_writes_no_workflow_task(
    store: PostgresStore, clock: MovableClock
) -> None:
    p = start_params()
    op = op_params(p.id, 1)
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}")],
        operations=[op],
        local=local(op.execution_key),
    )
    result = await store.start_workflow_with_pass(p, write, trace_context={"traceparent": "x"})
    assert result.inserted
    assert result.commit is not None
    [job] = result.commit.leased
    assert job.attempt == 1
    rows = await jobs_of(store, p.id)
    assert [(r["kind"], r["state"]) for r in rows] == [("$op:charge@1", "active")]
    assert [e.type for e in await store.list_history(p.id)] == ["ActivityScheduled"]
    view = await store.get_workflow_execution(p.id)
    assert (view.state, view.input) == ("running", p.input)


async def test_start_with_first_pass_on_a_taken_id_or_key_writes_nothing(
    store: PostgresStore, clock: MovableClock
) -> None:
    first = start_params(key="k")
    assert (await store.start_workflow(first))[0]
    before = await snapshot(store, first.id)
    write = PassWrite(expected_next_seq=1, events=[("ActivityScheduled", b"{}")])
    same_id = await store.start_workflow_with_pass(first, write)
    assert (same_id.inserted, same_id.id, same_id.commit) == (False, first.id, None)
    same_key = start_params(key="k")
    dup = await store.start_workflow_with_pass(same_key, write)
    assert (dup.inserted, dup.id) == (False, first.id)
    assert await snapshot(store, first.id) == before
    assert (
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_workflow_executions WHERE id = $1", same_key.id
        )
        == 0
    )
    with pytest.raises(ValueError, match="seq 1"):
        await store.start_workflow_with_pass(start_params(), PassWrite(expected_next_seq=2))


async def test_lease_and_load_in_one_statement_reads_history_past_the_known_seq(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    wid = await started(store)
    await commit(store, wid, events=[(f"E{i}", b"{}") for i in range(3)])
    await store.signal_workflow(SignalParams(workflow_id=wid, name="go", payload=b'"p"'))
    [task] = await store.lease_workflow_tasks(10, LEASE, known={wid: 2})
    assert task.job.run_id == wid
    assert task.job.lease_token is not None
    assert task.job.attempt == 1
    assert task.after_seq == 2
    assert [e.seq for e in task.state.history] == [3]
    assert task.state.next_seq == 4
    assert [s.name for s in task.state.signals] == ["go"]
    assert task.state.now == datetime(2030, 1, 1, tzinfo=UTC)
    assert task.state.execution.id == wid
    # never a second task of an execution whose task is active
    await store.signal_workflow(SignalParams(workflow_id=wid, name="again"))
    assert await store.lease_workflow_tasks(10, LEASE) == []
    await store.commit_pass(task.job.id, task.job.lease_token, wid, PassWrite(expected_next_seq=4))
    [again] = await store.lease_workflow_tasks(10, LEASE)
    assert [e.seq for e in again.state.history] == [1, 2, 3]  # unknown: the whole history
