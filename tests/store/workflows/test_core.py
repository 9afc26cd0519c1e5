"""Contract clauses of WorkflowStore (executions, history, signals, jobs) on real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import Outcome, PassWrite, SignalParams, WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    commit,
    finish,
    jobs_of,
    lease_task,
    op_params,
    runnable_tasks,
    scheduled_op,
    snapshot,
    start_params,
    started,
)


async def test_start_inserts_running_execution_with_one_pending_task(store: PostgresStore) -> None:
    p = start_params(key="k1")
    assert await store.start_workflow(p, trace_context={"traceparent": "00-abc-def-01"}) == (
        True,
        p.id,
    )
    view = await store.get_workflow_execution(p.id)
    assert view.state == WorkflowState.RUNNING
    assert (view.name, view.version, view.input) == ("order", "1", b'{"n":1}')
    assert view.business_idempotency_key == "k1"
    (task,) = await jobs_of(store, p.id)
    assert (task["kind"], task["task_key"], task["state"]) == ("$wft", "$wft", "pending")
    state = await store.load_workflow_task(p.id)
    assert state.trace_context == {"traceparent": "00-abc-def-01"}
    assert state.next_seq == 1


async def test_idempotent_start_returns_existing_id_while_live_and_frees_key_when_terminal(
    store: PostgresStore,
) -> None:
    first = start_params(key="K")
    assert await store.start_workflow(first) == (True, first.id)
    again = start_params(key="K", input=b'{"n":2}')
    assert await store.start_workflow(again) == (False, first.id)
    await finish(store, first.id, ("suspend", "operator"))
    assert await store.start_workflow(start_params(key="K")) == (False, first.id)
    other_name = start_params(name="refund", key="K")
    assert await store.start_workflow(other_name) == (True, other_name.id)
    assert len(await jobs_of(store, again.id)) == 0  # the loser scheduled nothing
    assert await store.cancel_workflow_execution(first.id) == WorkflowState.CANCELLED
    fresh = start_params(key="K")
    assert await store.start_workflow(fresh) == (True, fresh.id)


async def test_start_with_an_existing_id_returns_it_and_writes_nothing(
    store: PostgresStore,
) -> None:
    p = start_params()
    await store.start_workflow(p)
    before = await snapshot(store, p.id)
    dup = start_params(name="other")
    dup.id = p.id
    assert await store.start_workflow(dup) == (False, p.id)
    assert await snapshot(store, p.id) == before


async def test_concurrent_starts_with_one_key_insert_exactly_one(
    store: PostgresStore,
) -> None:
    params = [start_params(key="race") for _ in range(8)]
    results = await asyncio.gather(*(store.start_workflow(p) for p in params))
    winners = [wid for inserted, wid in results if inserted]
    assert len(winners) == 1
    assert {wid for _, wid in results} == {winners[0]}


async def test_get_missing_execution_is_not_found(store: PostgresStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match=str(missing)):
        await store.get_workflow_execution(missing)
    with pytest.raises(NotFoundError):
        await store.list_history(missing)


async def test_a_pass_appends_its_events_at_consecutive_seqs_listed_in_order(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    events = [(f"E{i}", f'{{"i":{i}}}'.encode()) for i in range(3)]
    assert await commit(store, wid, events=events) == 4
    history = await store.list_history(wid)
    assert [(e.seq, e.type, e.payload) for e in history] == [
        (1, "E0", b'{"i":0}'),
        (2, "E1", b'{"i":1}'),
        (3, "E2", b'{"i":2}'),
    ]
    assert [e.seq for e in await store.list_history(wid, after_seq=2)] == [3]
    assert (await store.load_workflow_task(wid)).next_seq == 4


async def test_payloads_round_trip_byte_for_byte(store: PostgresStore) -> None:
    nul = '{"s":"a\\u0000b","e":"\U0001f680 caf\u00e9","k":{"z":1,"a":2}}'.encode()
    big = b'{"blob":"' + b"x\\u0000" * (10 * 1024 * 1024 // 7) + b'"}'
    assert len(big) >= 10 * 1024 * 1024
    p = start_params(input=nul)
    await store.start_workflow(p)
    assert (await store.get_workflow_execution(p.id)).input == nul
    big_op = msgspec.structs.replace(op_params(p.id, 1), payload=big)
    await commit(store, p.id, events=[("Big", big), ("Nul", nul)], operations=[big_op])
    assert [e.payload for e in await store.list_history(p.id)] == [big, nul]
    assert await store.signal_workflow(SignalParams(workflow_id=p.id, name="s", payload=nul))
    (sig,) = (await store.load_workflow_task(p.id)).signals
    assert sig.payload == nul
    (op_id,) = [
        j["id"] for j in await jobs_of(store, p.id) if j["task_key"] == big_op.execution_key
    ]
    op_payload = await store.pool.fetchval("SELECT payload FROM azync_jobs WHERE id = $1", op_id)
    assert bytes(op_payload) == big
    await finish(store, p.id, ("complete", big))
    assert (await store.get_workflow_execution(p.id)).result == big


async def test_signal_dedupes_by_message_id_even_after_the_run_finished(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    sig = SignalParams(workflow_id=wid, name="pay", payload=b'{"v":1}', message_id="p1")
    assert await store.signal_workflow(sig) is True
    assert await store.signal_workflow(sig) is False
    assert await store.signal_workflow(SignalParams(workflow_id=wid, name="pay")) is True
    assert await store.signal_workflow(SignalParams(workflow_id=wid, name="pay")) is True
    signals = (await store.load_workflow_task(wid)).signals
    assert [(s.name, s.message_id) for s in signals] == [("pay", "p1"), ("pay", ""), ("pay", "")]
    await finish(store, wid, ("complete", b"null"))
    assert await store.signal_workflow(sig) is False  # a retried send: same ack, no error


async def test_signal_to_finished_run_raises_not_found_and_changes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await finish(store, wid, ("fail", "boom"))
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match=rf"{wid} is failed \(finished\)"):
        await store.signal_workflow(SignalParams(workflow_id=wid, name="go", message_id="m"))
    assert await snapshot(store, wid) == before
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match=rf"{missing} does not exist"):
        await store.signal_workflow(SignalParams(workflow_id=missing, name="go"))


async def test_signal_schedules_a_workflow_task_unless_suspended(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    assert await runnable_tasks(store, wid) == []
    await store.signal_workflow(SignalParams(workflow_id=wid, name="a"))
    assert len(await runnable_tasks(store, wid)) == 1
    other = await started(store)
    await finish(store, other, ("suspend", "paused by operator"))
    assert await store.signal_workflow(SignalParams(workflow_id=other, name="a"))
    assert await runnable_tasks(store, other) == []  # buffered; resume wakes it
    await store.resume_workflow(other)
    assert len(await runnable_tasks(store, other)) == 1


async def test_a_completing_or_failing_pass_is_terminal_and_retires_runnable_operations(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    op_id = await scheduled_op(store, wid)
    await finish(store, wid, ("complete", b'{"ok":true}'))
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.result) == (WorkflowState.SUCCEEDED, b'{"ok":true}')
    assert view.completed_at is not None
    assert {j["id"]: j["state"] for j in await jobs_of(store, wid)}[op_id] == "cancelled"
    assert await runnable_tasks(store, wid) == []
    wid2 = await started(store)
    await finish(store, wid2, ("fail", "card declined"))
    view2 = await store.get_workflow_execution(wid2)
    assert (view2.state, view2.failure_reason) == (WorkflowState.FAILED, "card declined")


async def test_cancel_requests_cancellation_and_schedules_a_task(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    await store.cancel_workflow_execution(wid)
    state = await store.load_workflow_task(wid)
    assert state.cancel_requested is True
    assert state.execution.state == WorkflowState.RUNNING
    assert len(await runnable_tasks(store, wid)) == 1
    await finish(store, wid, ("complete", b"null"))
    with pytest.raises(NotFoundError, match="succeeded"):
        await store.cancel_workflow_execution(wid)


@pytest.mark.parametrize(
    "outcome", [None, ("complete", b"null"), ("fail", "boom")], ids=["goes-on", "complete", "fail"]
)
async def test_a_pass_that_does_not_know_of_a_cancel_requested_meanwhile_is_refused(
    store: PostgresStore, outcome: Outcome | None
) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    state = await store.load_workflow_task(wid)  # loaded before the request
    await store.cancel_workflow_execution(wid)
    write = PassWrite(expected_next_seq=state.next_seq, outcome=outcome)
    with pytest.raises(ConflictError, match=r"cancel .* was requested during the pass"):
        await store.commit_pass(task.id, task.lease_token, wid, write)  # type: ignore[arg-type]
    after = await store.load_workflow_task(wid)
    assert (after.execution.state, after.next_seq) == (WorkflowState.RUNNING, state.next_seq)
    known = PassWrite(expected_next_seq=state.next_seq, outcome=outcome, cancel_known=True)
    await store.commit_pass(task.id, task.lease_token, wid, known)  # type: ignore[arg-type]


async def test_suspend_and_resume_toggle_state_and_resume_schedules_a_task(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await finish(store, wid, ("suspend", "nondeterminism at seq 3"))
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.SUSPENDED
    assert state.suspend_reason == "nondeterminism at seq 3"
    assert await runnable_tasks(store, wid) == []
    await store.resume_workflow(wid)
    state = await store.load_workflow_task(wid)
    assert (state.execution.state, state.suspend_reason) == (WorkflowState.RUNNING, "")
    assert len(await runnable_tasks(store, wid)) == 1
    with pytest.raises(NotFoundError, match="is running"):
        await store.resume_workflow(wid)


async def test_a_pass_dedupes_operations_by_execution_key_among_live_operations(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    first = await scheduled_op(store, wid, 1)
    assert await scheduled_op(store, wid, 1) == first
    second = await scheduled_op(store, wid, 2)
    assert second != first
    await store.pool.execute("UPDATE azync_jobs SET state = 'succeeded' WHERE id = $1", first)
    third = await scheduled_op(store, wid, 1)
    assert third not in (first, second)
    ops = [j for j in await jobs_of(store, wid) if j["task_key"] != "$wft"]
    assert len(ops) == 3


async def test_one_runnable_task_per_execution_keeps_the_earliest_run_at(
    store: PostgresStore, clock: MovableClock
) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    clock.set(now)
    wid = await started(store)
    task = await lease_task(store, wid)
    await store.ack(task.id, task.lease_token)
    await store.schedule_task(wid, "$wft", now + timedelta(hours=2))
    await store.schedule_task(wid, "$wft", now + timedelta(hours=1))
    await store.schedule_task(wid, "$wft", now + timedelta(hours=3))
    (only,) = await runnable_tasks(store, wid)
    assert (only["state"], only["run_at"]) == ("scheduled", now + timedelta(hours=1))
    await store.schedule_task(wid)
    (only,) = await runnable_tasks(store, wid)
    assert (only["state"], only["run_at"]) == ("pending", now)
    with pytest.raises(NotFoundError):
        await store.schedule_task(uuid.uuid4())


async def test_concurrent_signals_leave_exactly_one_runnable_task(store: PostgresStore) -> None:
    wid = await started(store)
    task = await lease_task(store, wid)
    results = await asyncio.gather(
        *(store.signal_workflow(SignalParams(workflow_id=wid, name=f"s{i}")) for i in range(20))
    )
    assert all(results)
    assert len(await runnable_tasks(store, wid)) == 1
    await store.ack(task.id, task.lease_token)


async def test_vacuum_removes_old_terminal_executions_with_everything_linked(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    old = await started(store)
    await store.signal_workflow(SignalParams(workflow_id=old, name="s"))
    await commit(
        store,
        old,
        events=[("E", b"{}")],
        operations=[op_params(old, 2)],
        timers=[(3, timedelta(hours=1))],
    )
    await finish(store, old, ("fail", "x"))
    live = await started(store)
    recent = await started(store)
    clock.set(t0 + timedelta(days=2))
    await finish(store, recent, ("complete", b"null"))
    clock.set(t0 + timedelta(days=3))
    assert await store.vacuum_workflows(timedelta(0)) == 0
    assert await store.vacuum_workflows(timedelta(days=2)) == 1
    for table, col in [
        ("azync_workflow_history", "workflow_id"),
        ("azync_workflow_signals", "workflow_id"),
        ("azync_workflow_timers", "workflow_id"),
        ("azync_jobs", "run_id"),
    ]:
        assert await store.pool.fetchval(f"SELECT count(*) FROM {table} WHERE {col} = $1", old) == 0
    assert await store.pool.fetchval("SELECT count(*) FROM azync_job_attempts") == 0
    for kept in (live, recent):
        assert (await store.get_workflow_execution(kept)).id == kept
    with pytest.raises(NotFoundError):
        await store.get_workflow_execution(old)


async def test_list_stalled_returns_running_executions_with_no_live_job(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    waiting = await started(store, name="waiting")
    task = await lease_task(store, waiting)
    await store.ack(task.id, task.lease_token)  # e.g. a job deleted by hand
    has_task = await started(store, name="has_task")
    suspended = await started(store, name="suspended")
    await finish(store, suspended, ("suspend", "x"))
    # olderThan 0 is inclusive: same clock tick counts
    assert [(s.id, s.name) for s in await store.list_stalled_workflows(timedelta(0), 10)] == [
        (waiting, "waiting")
    ]
    assert await store.list_stalled_workflows(timedelta(minutes=5), 10) == []
    clock.set(t0 + timedelta(minutes=5))
    assert [s.id for s in await store.list_stalled_workflows(timedelta(minutes=5), 10)] == [waiting]
    assert await store.list_stalled_workflows(timedelta(0), 0) == []
    await store.schedule_task(waiting, "$wft", t0 + timedelta(days=1))  # scheduled = live
    assert await store.list_stalled_workflows(timedelta(0), 10) == []
    assert has_task not in {s.id for s in await store.list_stalled_workflows(timedelta(0), 10)}


async def test_store_verbs_on_a_conflicting_key_never_mix_up_executions(
    store: PostgresStore,
) -> None:
    a = await started(store, key="same")
    await finish(store, a, ("complete", b'"a"'))
    b = await started(store, key="same")
    with pytest.raises(NotFoundError):
        await store.cancel_workflow_execution(a)
    with pytest.raises(NotFoundError):
        await store.signal_workflow(SignalParams(workflow_id=a, name="late"))
    assert (await store.get_workflow_execution(a)).result == b'"a"'
    assert (await store.get_workflow_execution(b)).state == WorkflowState.RUNNING


async def test_failure_text_with_nul_or_lone_surrogates_is_stored_escaped(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await finish(store, wid, ("suspend", "bad\x00byte"))
    assert (await store.load_workflow_task(wid)).suspend_reason == "bad\\x00byte"
    failed = await started(store)
    await finish(store, failed, ("fail", "ValueError: a\x00b \ud800 caf\u00e9"))
    view = await store.get_workflow_execution(failed)
    assert view.failure_reason == "ValueError: a\\x00b \\ud800 caf\u00e9"


async def test_daily_stats_count_each_inserted_workflow_job_once(store: PostgresStore) -> None:
    wid = await started(store)
    await store.schedule_task(wid)  # merged into the pending task: not a new job
    await scheduled_op(store, wid, 1)  # the first task carries this pass
    await scheduled_op(store, wid, 1)  # a new task; the operation is deduped
    counted = []
    for kind in await store.list_kinds(Source.WORKFLOW):
        _, daily = await store.stats(Source.WORKFLOW, kind)
        counted.append((kind, sum(d.enqueued for d in daily)))
    assert counted == [("$op:charge@1", 1), ("$wft", 2)]


async def test_stalled_scan_examines_only_past_its_cursor_and_executions_with_a_buffered_signal(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    ids = []
    for name in ("a", "b", "c"):
        run = await started(store, name=name)
        task = await lease_task(store, run)
        await store.ack(task.id, task.lease_token)  # nothing pending: stalled
        ids.append(run)
        clock.advance(timedelta(seconds=10))  # one 10-second progress bin each
    await store.pool.execute(
        "UPDATE azync_workflow_executions SET awaited_signals = '{go}' WHERE id = $1", ids[0]
    )
    first = await store.scan_stalled_workflows(timedelta(0), None, 2)
    assert (first.scanned, [s.id for s in first.stalled]) == (2, [ids[1]])  # ids[0] waits
    assert first.cursor is not None
    assert first.cursor[1] == ids[1]
    rest = await store.scan_stalled_workflows(timedelta(0), first.cursor, 2)
    assert (rest.scanned, [s.id for s in rest.stalled]) == (1, [ids[2]])
    assert rest.cursor is not None
    caught_up = await store.scan_stalled_workflows(timedelta(0), rest.cursor, 2)
    assert (caught_up.scanned, caught_up.stalled, caught_up.cursor) == (0, [], None)
    # the awaited signal is buffered but its task was lost: found behind the cursor
    await store.pool.execute(
        "INSERT INTO azync_workflow_signals (workflow_id, name, payload, created_at)"
        " VALUES ($1, 'go', 'null', now())",
        ids[0],
    )
    late = await store.scan_stalled_workflows(timedelta(0), rest.cursor, 2)
    assert (late.scanned, [s.id for s in late.stalled]) == (0, [ids[0]])
    assert [s.id for s in await store.list_stalled_workflows(timedelta(0), 10)] == ids
    assert [s.id for s in await store.list_stalled_workflows(timedelta(0), 2)] == ids[:2]
    with pytest.raises(ValueError, match="batch"):
        await store.scan_stalled_workflows(timedelta(0), None, 0)


async def test_stalled_scan_examines_the_cutoffs_own_bin_without_moving_its_cursor(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    run = await started(store, name="fresh")
    task = await lease_task(store, run)
    await store.ack(task.id, task.lease_token)
    # updated in the bin the cutoff falls in: found, but not behind the cursor
    now = await store.scan_stalled_workflows(timedelta(0), None, 10)
    assert (now.scanned, [s.id for s in now.stalled], now.cursor) == (0, [run], None)
    # not old enough yet: neither found nor passed
    young = await store.scan_stalled_workflows(timedelta(minutes=5), None, 10)
    assert (young.scanned, young.stalled, young.cursor) == (0, [], None)
    clock.advance(timedelta(minutes=5, seconds=10))  # its bin has ended 5 minutes ago
    aged = await store.scan_stalled_workflows(timedelta(minutes=5), None, 10)
    assert (aged.scanned, [s.id for s in aged.stalled]) == (1, [run])
    assert aged.cursor is not None
    assert aged.cursor[1] == run
