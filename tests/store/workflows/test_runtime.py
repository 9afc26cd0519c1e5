"""Runtime verbs of the workflow store: leasing, loading and committing passes,
completing operations — fencing and atomicity on real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import Job
from azync_flow.store.workflows import SignalParams, WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    commit,
    commit_workflow_task,
    finish,
    jobs_of,
    lease_op,
    lease_task,
    op_params,
    runnable_tasks,
    scheduled_op,
    snapshot,
    started,
)


async def _simulate_lease_expiry_reap(store: PostgresStore, job_id: uuid.UUID) -> None:
    """What a lease-expiry reaper does to an expired job (contract ReapExpired)."""
    await store.pool.execute(
        "UPDATE azync_jobs SET state = 'pending', reap_count = reap_count + 1,"
        " lease_until = NULL WHERE id = $1 AND state = 'active'",
        job_id,
    )


async def test_dequeue_skips_executions_with_an_active_workflow_task(store: PostgresStore) -> None:
    wid = await started(store)
    other = await started(store)
    first = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="mid-pass"))
    assert len(await runnable_tasks(store, wid)) == 1  # pending while the pass is active
    leased = await store.lease_workflow_tasks(10, LEASE)
    assert [t.job.run_id for t in leased] == [other]
    await store.ack(first.id, first.lease_token)
    second = await lease_task(store, wid)
    assert second.id != first.id


async def test_concurrent_dequeuers_never_lease_two_tasks_of_one_execution(
    store: PostgresStore,
) -> None:
    runs = [await started(store) for _ in range(10)]
    for wid in runs:  # a second runnable task per run while the first one is leased
        await lease_task(store, wid)
    for wid in runs:
        await store.signal_workflow(SignalParams(workflow_id=wid, name="x"))
    batches = await asyncio.gather(*(store.lease_workflow_tasks(5, LEASE) for _ in range(4)))
    assert [j for b in batches for j in b] == []
    active = await store.pool.fetchval(
        "SELECT max(n) FROM (SELECT count(*) n FROM azync_jobs WHERE state = 'active'"
        " AND task_key = '$wft' GROUP BY run_id) c"
    )
    assert active == 1


async def test_dequeue_takes_due_scheduled_tasks_without_promotion(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    await store.schedule_task(wid, "$wft", t0 + timedelta(days=30))
    assert await store.lease_workflow_tasks(10, LEASE) == []
    clock.set(t0 + timedelta(days=30))
    (leased,) = await store.lease_workflow_tasks(10, LEASE)
    assert leased.job.run_id == wid
    assert leased.job.lease_until == t0 + timedelta(days=30) + LEASE


async def test_tasks_of_executions_in_flight_are_leased_before_first_passes(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    in_flight = await started(store)
    task = await lease_task(store, in_flight)
    await store.ack(task.id, task.lease_token)
    clock.set(t0 + timedelta(seconds=1))
    new = await started(store)  # its first pass: older than the signal's task below
    clock.set(t0 + timedelta(seconds=2))
    await store.signal_workflow(SignalParams(workflow_id=in_flight, name="go"))
    [first] = await store.lease_workflow_tasks(1, LEASE)
    assert first.job.run_id == in_flight
    [second] = await store.lease_workflow_tasks(1, LEASE)
    assert second.job.run_id == new


async def test_without_first_passes_only_executions_in_flight_are_leased(
    store: PostgresStore, clock: MovableClock
) -> None:
    in_flight = await started(store)
    task = await lease_task(store, in_flight)
    await store.ack(task.id, task.lease_token)
    new = [await started(store) for _ in range(3)]
    assert await store.lease_workflow_tasks(10, LEASE, first_passes=False) == []
    await store.signal_workflow(SignalParams(workflow_id=in_flight, name="go"))
    [leased] = await store.lease_workflow_tasks(10, LEASE, first_passes=False)
    assert leased.job.run_id == in_flight
    # a first pass stays a first pass when a signal merges into its task
    await store.signal_workflow(SignalParams(workflow_id=new[0], name="early"))
    assert await store.lease_workflow_tasks(10, LEASE, first_passes=False) == []
    assert {t.job.run_id for t in await store.lease_workflow_tasks(10, LEASE)} == set(new)


async def test_load_workflow_task_returns_one_consistent_snapshot(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = datetime(2031, 5, 1, tzinfo=UTC)
    clock.set(t0)
    wid = await started(store)
    task = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("WorkflowStarted", b"{}"), ("TimerStarted", b'{"seq":2}')],
        timers=[(2, timedelta(minutes=10)), (3, timedelta(hours=1))],
    )
    await store.signal_workflow(SignalParams(workflow_id=wid, name="a", payload=b"1"))
    await store.signal_workflow(SignalParams(workflow_id=wid, name="b", payload=b"2"))
    clock.set(t0 + timedelta(minutes=10))
    state = await store.load_workflow_task(wid, after_seq=1)
    assert [e.seq for e in state.history] == [2]
    assert [(s.name, s.payload) for s in state.signals] == [("a", b"1"), ("b", b"2")]
    assert state.due_timers == [2]
    assert state.now == t0 + timedelta(minutes=10)
    assert state.next_seq == 3
    with pytest.raises(NotFoundError):
        await store.load_workflow_task(uuid.uuid4())


async def test_commit_writes_the_whole_pass_and_acks_its_task(store: PostgresStore) -> None:
    wid = await started(store)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="go", message_id="m1"))
    task = await lease_task(store, wid)
    state = await store.load_workflow_task(wid)
    (sig,) = state.signals
    new_next = await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        state.next_seq,
        events=[
            ("WorkflowStarted", b"{}"),
            ("SignalReceived", b'{"name":"go"}'),
            ("ActivityScheduled", b'{"seq":3}'),
        ],
        operations=[op_params(wid, 3)],
        consumed_signals=[(sig.signal_id, 2)],
    )
    assert new_next == 4
    assert [e.type for e in await store.list_history(wid)] == [
        "WorkflowStarted",
        "SignalReceived",
        "ActivityScheduled",
    ]
    after = await store.load_workflow_task(wid)
    assert after.signals == []
    jobs = {j["task_key"]: j for j in await jobs_of(store, wid)}
    assert jobs["$wft"]["state"] == "succeeded"
    assert jobs[f"{wid}/3"]["state"] == "pending"
    assert await runnable_tasks(store, wid) == []  # nothing to do until the op completes


async def test_commit_with_a_stale_lease_token_is_not_found_and_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="lease token"):
        await commit_workflow_task(
            store,
            task.id,
            uuid.uuid4(),
            wid,
            1,
            events=[("WorkflowStarted", b"{}")],
            operations=[op_params(wid, 1)],
            timers=[(2, timedelta(seconds=5))],
            outcome=("complete", b"1"),
        )
    assert await snapshot(store, wid) == before


async def test_commit_with_a_wrong_expected_seq_is_conflict_and_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    task = await lease_task(store, wid)
    (sig,) = (await store.load_workflow_task(wid)).signals
    await store.append_history(wid, "ActivityCompleted", b"{}")  # another writer moves the seq
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="is at seq 2, the pass expected 1"):
        await commit_workflow_task(
            store,
            task.id,
            task.lease_token,
            wid,
            1,
            events=[("WorkflowStarted", b"{}"), ("SignalReceived", b"{}")],
            operations=[op_params(wid, 3)],
            timers=[(4, timedelta(seconds=5))],
            consumed_signals=[(sig.signal_id, 2)],
            outcome=("complete", b"1"),
            next_task_at="now",
        )
    assert await snapshot(store, wid) == before


async def test_duplicate_pass_loser_writes_nothing(store: PostgresStore, pg_dsn: str) -> None:
    """Pass A's lease expires and is reaped; pass B leases the same task. Both
    commit at once on separate connections: exactly one pass's writes land."""
    wid = await started(store)
    a = await lease_task(store, wid)
    await _simulate_lease_expiry_reap(store, a.id)
    b = await lease_task(store, wid)
    assert (a.id, a.lease_token) != (b.id, b.lease_token)
    other = await open_store(pg_dsn, Config(schema=store.schema), migrate=False)
    try:
        results = await asyncio.gather(
            commit_workflow_task(
                store,
                a.id,
                a.lease_token,
                wid,
                1,
                events=[("A", b"a")],
                operations=[op_params(wid, 1)],
            ),
            commit_workflow_task(
                other,
                b.id,
                b.lease_token,
                wid,
                1,
                events=[("B", b"b")],
                operations=[op_params(wid, 1)],
            ),
            return_exceptions=True,
        )
    finally:
        await other.close()
    assert isinstance(results[0], NotFoundError)
    assert results[1] == 2
    assert [(e.seq, e.type) for e in await store.list_history(wid)] == [(1, "B")]
    assert len([j for j in await jobs_of(store, wid) if j["task_key"] != "$wft"]) == 1


async def test_two_passes_racing_on_the_seq_fence_exactly_one_commits(
    store: PostgresStore, pg_dsn: str
) -> None:
    """Two live tasks (one per execution is leased at a time, so force it by hand)
    with the same expected seq, committed concurrently on separate connections."""
    wid = await started(store)
    a = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    await store.pool.execute(  # bypass the leasing rule to race two passes
        "UPDATE azync_jobs SET state = 'active', lease_token = gen_random_uuid()"
        " WHERE run_id = $1 AND state = 'pending'",
        wid,
    )
    token_b, b_id = await store.pool.fetchrow(
        "SELECT lease_token, id FROM azync_jobs WHERE run_id = $1 AND id <> $2", wid, a.id
    )
    other = await open_store(pg_dsn, Config(schema=store.schema), migrate=False)
    try:
        results = await asyncio.gather(
            commit_workflow_task(store, a.id, a.lease_token, wid, 1, events=[("A", b"")]),
            commit_workflow_task(other, b_id, token_b, wid, 1, events=[("B", b"")]),
            return_exceptions=True,
        )
    finally:
        await other.close()
    winners = [r for r in results if r == 2]
    losers = [r for r in results if isinstance(r, ConflictError)]
    assert (len(winners), len(losers)) == (1, 1)
    history = await store.list_history(wid)
    assert len(history) == 1
    loser_id = a.id if isinstance(results[0], ConflictError) else b_id
    assert await store.abandon_workflow_task(
        loser_id, a.lease_token if loser_id == a.id else token_b
    )
    assert len(await runnable_tasks(store, wid)) == 1


async def test_commit_with_complete_outcome_finishes_and_retires_runnable_jobs(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="late"))
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("WorkflowCompleted", b'"ok"')],
        outcome=("complete", b'"ok"'),
        next_task_at="now",
    )
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.result) == (WorkflowState.SUCCEEDED, b'"ok"')
    assert await runnable_tasks(store, wid) == []
    assert {j["state"] for j in await jobs_of(store, wid)} == {"succeeded", "cancelled"}


@pytest.mark.parametrize(
    ("outcome", "state", "reason"),
    [
        (("fail", "ValueError: bad"), WorkflowState.FAILED, "ValueError: bad"),
        (("cancelled", "cancelled by user"), WorkflowState.CANCELLED, "cancelled by user"),
        (("suspend", "NonDeterminismError at seq 1"), WorkflowState.SUSPENDED, ""),
    ],
)
async def test_commit_applies_fail_cancel_and_suspend_outcomes(
    store: PostgresStore, outcome: tuple[str, str], state: WorkflowState, reason: str
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await commit_workflow_task(store, task.id, task.lease_token, wid, 1, outcome=outcome)  # type: ignore[arg-type]
    loaded = await store.load_workflow_task(wid)
    assert loaded.execution.state == state
    assert loaded.execution.failure_reason == reason
    if state == WorkflowState.SUSPENDED:
        assert loaded.suspend_reason == outcome[1]
    assert await runnable_tasks(store, wid) == []


async def test_commit_schedules_the_next_task_at_the_earliest_timer(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = datetime(2032, 1, 1, tzinfo=UTC)
    clock.set(t0)
    wid = await started(store)
    task = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("TimerStarted", b"{}"), ("TimerStarted", b"{}")],
        timers=[(1, timedelta(days=30)), (2, timedelta(hours=1))],
    )
    (nxt,) = await runnable_tasks(store, wid)
    assert (nxt["state"], nxt["run_at"]) == ("scheduled", t0 + timedelta(hours=1))
    clock.set(t0 + timedelta(hours=1))
    task2 = await lease_task(store, wid)
    state = await store.load_workflow_task(wid)
    assert state.due_timers == [2]
    await commit_workflow_task(
        store, task2.id, task2.lease_token, wid, 3, events=[("TimerFired", b"{}")], fired_timers=[2]
    )
    (nxt,) = await runnable_tasks(store, wid)
    assert nxt["run_at"] == t0 + timedelta(days=30)


async def test_commit_refuses_a_signal_already_consumed(store: PostgresStore) -> None:
    wid = await started(store)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    (sig,) = (await store.load_workflow_task(wid)).signals
    task = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("S", b"")],
        consumed_signals=[(sig.signal_id, 1)],
    )
    await store.schedule_task(wid)
    task2 = await lease_task(store, wid)
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="already consumed"):
        await commit_workflow_task(
            store,
            task2.id,
            task2.lease_token,
            wid,
            2,
            events=[("S", b"")],
            consumed_signals=[(sig.signal_id, 2)],
        )
    assert await snapshot(store, wid) == before


async def test_abandon_acks_when_another_task_is_runnable_else_releases(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    assert await store.abandon_workflow_task(task.id, task.lease_token) is True
    (again,) = await runnable_tasks(store, wid)
    assert (again["id"], again["attempt"]) == (task.id, 0)
    task = await lease_task(store, wid)
    await store.signal_workflow(SignalParams(workflow_id=wid, name="s"))
    assert await store.abandon_workflow_task(task.id, task.lease_token) is False
    assert len(await runnable_tasks(store, wid)) == 1
    with pytest.raises(NotFoundError):
        await store.abandon_workflow_task(task.id, task.lease_token)


async def _leased_op(store: PostgresStore, wid: uuid.UUID, seq: int = 1) -> Job:
    return await lease_op(store, await scheduled_op(store, wid, seq))


async def test_complete_operation_acks_appends_and_schedules_in_one_step(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    t = await lease_task(store, wid)
    await commit_workflow_task(store, t.id, t.lease_token, wid, 1, events=[("Sched", b"")])
    op = await _leased_op(store, wid)
    seq = await store.complete_operation(op.id, op.lease_token, wid, "ActivityCompleted", b'"r"')
    assert seq == 2
    assert [(e.seq, e.type, e.payload) for e in await store.list_history(wid)][-1] == (
        2,
        "ActivityCompleted",
        b'"r"',
    )
    jobs = {j["id"]: j for j in await jobs_of(store, wid)}
    assert jobs[op.id]["state"] == "succeeded"
    assert len(await runnable_tasks(store, wid)) == 1
    with pytest.raises(NotFoundError):  # a second report of the same attempt
        await store.complete_operation(op.id, op.lease_token, wid, "ActivityCompleted", b'"r"')
    assert len(await store.list_history(wid)) == 2


async def test_complete_operation_dead_letters_with_its_error(store: PostgresStore) -> None:
    wid = await started(store)
    op = await _leased_op(store, wid)
    seq = await store.complete_operation(
        op.id, op.lease_token, wid, "ActivityFailed", b'{"e":1}', dead=True, last_error="boom"
    )
    assert seq == 1
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["last_error"]) == ("dead", "boom")


async def test_complete_operation_with_a_stale_token_writes_nothing(store: PostgresStore) -> None:
    wid = await started(store)
    op = await _leased_op(store, wid)
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="lease token"):
        await store.complete_operation(op.id, uuid.uuid4(), wid, "ActivityCompleted", b"1")
    assert await snapshot(store, wid) == before


async def test_complete_operation_rolls_back_the_ack_when_the_append_fails(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    op = await _leased_op(store, wid)
    # A row already sits at next_seq, so the history append must fail...
    await store.pool.execute(
        "INSERT INTO azync_workflow_history VALUES ($1, 1, 'Squatter', ''::bytea, now())", wid
    )
    before = await snapshot(store, wid)
    with pytest.raises(Exception, match="duplicate key"):
        await store.complete_operation(op.id, op.lease_token, wid, "ActivityCompleted", b"1")
    # ...and the ack and the task scheduling roll back with it.
    assert await snapshot(store, wid) == before
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert row["state"] == "active"


async def test_complete_operation_on_a_finished_execution_settles_only_the_job(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    op = await _leased_op(store, wid)
    await finish(store, wid, ("complete", b"null"))
    assert await store.complete_operation(op.id, op.lease_token, wid, "X", b"1") == 0
    assert await store.list_history(wid) == []
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert row["state"] == "succeeded"


async def test_checkpoint_commit_keeps_the_lease_and_the_pass_commits_again(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = datetime(2033, 1, 1, tzinfo=UTC)
    clock.set(t0)
    wid = await started(store)
    task = await lease_task(store, wid)
    clock.set(t0 + timedelta(seconds=20))
    seq = await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("ActivityScheduled", b""), ("ActivityCompleted", b"1")],
        next_task_at="now",
        keep_lease=timedelta(seconds=30),
    )
    (row,) = await jobs_of(store, wid)
    assert (row["state"], row["lease_token"]) == ("active", task.lease_token)
    assert await store.pool.fetchval(
        "SELECT lease_until FROM azync_jobs WHERE id = $1", task.id
    ) == t0 + timedelta(seconds=50)
    assert await runnable_tasks(store, wid) == []
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        seq,
        events=[("Done", b"")],
        outcome=("complete", b"1"),
    )
    assert [e.seq for e in await store.list_history(wid)] == [1, 2, 3]
    assert (await jobs_of(store, wid))[0]["state"] == "succeeded"


async def test_promote_moves_due_scheduled_operations_to_pending(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    wid = await started(store)
    op = await _leased_op(store, wid)
    await store.reschedule(op.id, op.lease_token, timedelta(seconds=10), "transient")  # type: ignore[arg-type]
    assert await store.promote_workflow_jobs() == 0
    clock.set(t0 + timedelta(seconds=10))
    assert await store.promote_workflow_jobs(["$op:other@1"]) == 0
    assert await store.promote_workflow_jobs(["$op:charge@1"]) == 1
    again = await lease_op(store, op.id)
    assert (again.id, again.attempt) == (op.id, 2)


async def test_list_history_pages_by_seq(store: PostgresStore) -> None:
    wid = await started(store)
    await commit(store, wid, events=[("E", str(i).encode()) for i in range(5)])
    pages, after = [], 0
    while page := await store.list_history(wid, after_seq=after, limit=2):
        pages.append([e.seq for e in page])
        after = page[-1].seq
    assert pages == [[1, 2], [3, 4], [5]]


async def test_commit_to_a_finished_execution_is_conflict_and_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    # ended under the pass by another writer, its task left active
    await store.pool.execute(
        "UPDATE azync_workflow_executions SET state = 'failed', failure_reason = 'operator',"
        " completed_at = now() WHERE id = $1",
        wid,
    )
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="is failed"):
        await commit_workflow_task(
            store, task.id, task.lease_token, wid, 1, events=[("E", b"")], next_task_at="now"
        )
    assert await snapshot(store, wid) == before


async def test_every_workflow_query_prepares_against_the_migrated_schema(
    store: PostgresStore,
) -> None:
    from azync_flow.store.postgres._queries import QUERIES

    names = [n for n in QUERIES if n.startswith("workflow_")]
    assert len(names) > 30
    async with store.pool.acquire() as conn:
        for name in names:
            await conn.prepare(QUERIES[name])


async def test_operation_and_pass_failures_with_nul_are_recorded_not_lost(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    op = await _leased_op(store, wid)
    await store.complete_operation(
        op.id, op.lease_token, wid, "ActivityFailed", b"{}", dead=True, last_error="x\x00y"
    )
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["last_error"]) == ("dead", "x\\x00y")
    task = await lease_task(store, wid)
    await commit_workflow_task(
        store, task.id, task.lease_token, wid, 2, outcome=("fail", "boom\x00\udfff")
    )
    assert (await store.get_workflow_execution(wid)).failure_reason == "boom\\x00\\udfff"


async def test_now_is_the_clock_override_every_statement_reads(
    store: PostgresStore, clock: MovableClock, pg_dsn: str
) -> None:
    assert store.now() is None  # nothing set: the backend clock rules
    wid = await started(store)
    assert (await store.load_workflow_task(wid)).now is not None
    at = datetime(2034, 5, 6, 7, 8, 9, tzinfo=UTC)
    clock.set(at)
    assert store.now() == at
    assert (await store.load_workflow_task(wid)).now == at
    plain = await open_store(pg_dsn, Config(schema=store.schema), migrate=False)
    try:
        assert plain.now() is None  # a store opened without a clock
    finally:
        await plain.close()
