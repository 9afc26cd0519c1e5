"""Uncertain operations in the workflow store: mark_uncertain fencing,
the non-idempotent reaper, resolve_uncertain decisions, listing — real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, Job, Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    RESOLVED,
    UNCERTAIN,
    commit_workflow_task,
    jobs_of,
    lease_task,
    op_params,
    runnable_tasks,
    running_op,
    snapshot,
    started,
    uncertain_op,
)


async def _simulate_generic_reap(store: PostgresStore) -> int:
    """The generic lease reaper's statement (contract ReapExpired) over every expired job."""
    status = await store.pool.execute(
        "UPDATE azync_jobs SET state = 'pending', reap_count = reap_count + 1, lease_until = NULL"
        " WHERE state = 'active' AND lease_until < now() + interval '1 day'"
    )
    return int(status.split()[-1])


async def test_mark_uncertain_parks_the_op_suspends_the_run_and_records_history(
    store: PostgresStore,
) -> None:
    wid, op = await running_op(store)
    seq = await store.mark_uncertain(
        op.id, op.lease_token, "gateway timeout", event_type=UNCERTAIN, payload=b'{"seq":1}'
    )
    assert seq == 2
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["uncertain_reason"]) == ("uncertain", "gateway timeout")
    assert row["uncertain_since"] is not None
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.SUSPENDED
    assert "$op:charge@1" in state.suspend_reason
    assert f"{wid}/1" in state.suspend_reason
    assert "gateway timeout" in state.suspend_reason
    assert [(e.type, e.payload) for e in state.history][-1] == (UNCERTAIN, b'{"seq":1}')


async def test_suspension_by_an_uncertain_operation_names_it_on_the_view(
    store: PostgresStore,
) -> None:
    wid, op = await running_op(store)
    seq = await store.mark_uncertain(
        op.id, op.lease_token, "gateway timeout", event_type=UNCERTAIN, payload=b'{"seq":1}'
    )
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.SUSPENDED
    assert "gateway timeout" in view.suspend_reason
    assert (view.suspend_seq, view.suspend_operation_id) == (seq, op.id)


async def test_deciding_one_of_two_uncertain_operations_names_the_other_on_the_view(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    t = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        t.id,
        t.lease_token,
        wid,
        1,
        events=[("ActivityScheduled", b'{"seq":1}'), ("ActivityScheduled", b'{"seq":2}')],
        operations=[op_params(wid, 1, idempotent=False), op_params(wid, 2, idempotent=False)],
    )
    first, second = sorted(
        await store.dequeue_batch(
            Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
        ),
        key=lambda j: j.task_key,
    )
    for op, why in ((first, "timeout one"), (second, "timeout two")):
        await store.mark_uncertain(
            op.id, op.lease_token, why, event_type=UNCERTAIN, payload=b'{"seq":1}'
        )
    assert (await store.get_workflow_execution(wid)).suspend_operation_id == first.id
    await store.resolve_uncertain(first.id, "retry", decided_by="ann", resolved_event=RESOLVED)
    view = await store.get_workflow_execution(wid)
    assert view.state == WorkflowState.SUSPENDED
    assert view.suspend_operation_id == second.id
    assert "timeout two" in view.suspend_reason
    assert str(second.id) in view.suspend_reason
    await store.resolve_uncertain(second.id, "retry", decided_by="ann", resolved_event=RESOLVED)
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.suspend_reason, view.suspend_operation_id) == (
        WorkflowState.RUNNING,
        "",
        None,
    )


async def test_mark_uncertain_with_a_stale_token_is_not_found_and_changes_nothing(
    store: PostgresStore,
) -> None:
    wid, op = await running_op(store)
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="lease token"):
        await store.mark_uncertain(op.id, uuid.uuid4(), "x", event_type=UNCERTAIN, payload=b"{}")
    assert await snapshot(store, wid) == before
    await store.ack(op.id, op.lease_token)
    settled = await snapshot(store, wid)
    with pytest.raises(NotFoundError):
        await store.mark_uncertain(op.id, op.lease_token, "x", event_type=UNCERTAIN, payload=b"{}")
    assert await snapshot(store, wid) == settled


async def test_a_late_report_of_an_uncertain_attempt_is_fenced_out(store: PostgresStore) -> None:
    wid, op = await uncertain_op(store)
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError):
        await store.complete_operation(op.id, op.lease_token, wid, "ActivityCompleted", b"1")
    assert await snapshot(store, wid) == before


async def test_expired_non_idempotent_op_never_returns_to_pending(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, op = await running_op(store, idempotent=False)
    idem_wid, idem_op = await running_op(store, idempotent=True, activity="email")
    clock.advance(LEASE + timedelta(seconds=1))
    # The generic reaper re-queues the idempotent op but cannot touch the other one.
    assert await _simulate_generic_reap(store) == 1
    assert {j["id"]: j["state"] for j in await jobs_of(store, idem_wid)}[idem_op.id] == "pending"
    assert {j["id"]: j["state"] for j in await jobs_of(store, wid)}[op.id] == "active"

    seen: list[tuple[uuid.UUID, str]] = []

    def encode(job: Job, reason: str) -> tuple[str, bytes]:
        seen.append((job.id, reason))
        return UNCERTAIN, b'{"by":"reaper"}'

    assert await store.reap_uncertain_operations(encode) == [op.id]
    assert [i for i, _ in seen] == [op.id]
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert row["state"] == "uncertain"
    assert "lease expired" in row["uncertain_reason"]
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.SUSPENDED
    assert state.history[-1].payload == b'{"by":"reaper"}'
    assert await store.reap_uncertain_operations(encode) == []  # nothing left, no double mark
    await _simulate_generic_reap(store)
    assert {j["id"]: j["state"] for j in await jobs_of(store, wid)}[op.id] == "uncertain"


async def test_reaper_leaves_unexpired_and_idempotent_operations_alone(
    store: PostgresStore,
) -> None:
    await running_op(store, idempotent=False)
    await running_op(store, idempotent=True, activity="email")
    assert await store.reap_uncertain_operations(lambda j, r: (UNCERTAIN, b"{}")) == []


async def test_resolve_complete_succeeds_the_op_and_resumes_the_run(store: PostgresStore) -> None:
    wid, op = await uncertain_op(store)
    resolved = await store.resolve_uncertain(
        op.id,
        "complete",
        result=b'{"charge":"ch_1"}',
        note="provider shows the charge",
        decided_by="alice",
        resolved_event=RESOLVED,
        outcome_event=("ActivityCompleted", b'{"charge":"ch_1"}'),
    )
    assert resolved == (wid, "order")
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert row["state"] == "succeeded"
    assert (row["decision"], row["decision_by"], row["decision_note"]) == (
        "complete",
        "alice",
        "provider shows the charge",
    )
    assert row["decided_at"] is not None
    assert bytes(row["result"]) == b'{"charge":"ch_1"}'
    assert row["lease_token"] is None
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.RUNNING
    assert [e.type for e in state.history][-2:] == ["OperationResolved", "ActivityCompleted"]
    assert len(await runnable_tasks(store, wid)) == 1


async def test_resolve_fail_dead_letters_the_op_with_the_error(store: PostgresStore) -> None:
    wid, op = await uncertain_op(store)
    await store.resolve_uncertain(
        op.id,
        "fail",
        error="no charge found at the provider",
        decided_by="bob",
        resolved_event=RESOLVED,
        outcome_event=("ActivityFailed", b'{"error":"no charge"}'),
    )
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["last_error"], row["decision"]) == (
        "dead",
        "no charge found at the provider",
        "fail",
    )
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.RUNNING
    assert [e.type for e in state.history][-1] == "ActivityFailed"
    assert len(await runnable_tasks(store, wid)) == 1


async def test_resolve_retry_returns_the_op_to_pending_with_its_attempt_recorded(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    await store.resolve_uncertain(op.id, "retry", decided_by="carol", resolved_event=RESOLVED)
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["decision"], row["attempt"]) == ("pending", "retry", 1)
    attempts = await store.pool.fetch(
        "SELECT attempt, error FROM azync_job_attempts WHERE job_id = $1 ORDER BY id", op.id
    )
    assert [(a["attempt"], a["error"]) for a in attempts] == [
        (1, "uncertain: gateway timeout"),
        (1, "resolved retry by carol"),
    ]
    (again,) = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
    )
    assert (again.id, again.attempt) == (op.id, 2)
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.RUNNING


async def test_concurrent_resolvers_exactly_one_wins(store: PostgresStore, pg_dsn: str) -> None:
    wid, op = await uncertain_op(store)
    others = [
        await open_store(pg_dsn, Config(schema=store.schema), migrate=False) for _ in range(3)
    ]
    try:
        decisions = ["complete", "fail", "retry", "complete"]

        async def resolve(s: PostgresStore, decision: str) -> object:
            kw: dict[str, object] = {"resolved_event": RESOLVED}
            if decision == "complete":
                kw |= {"result": b"1", "outcome_event": ("ActivityCompleted", b"1")}
            elif decision == "fail":
                kw |= {"error": "e", "outcome_event": ("ActivityFailed", b"{}")}
            return await s.resolve_uncertain(op.id, decision, decided_by=decision, **kw)  # type: ignore[arg-type]

        results = await asyncio.gather(
            *(resolve(s, d) for s, d in zip([store, *others], decisions, strict=True)),
            return_exceptions=True,
        )
    finally:
        for s in others:
            await s.close()
    wins = [r for r in results if not isinstance(r, BaseException)]
    assert len(wins) == 1, results
    assert all(isinstance(r, ConflictError) for r in results if r not in wins), results
    history = await store.list_history(wid)
    assert [e.type for e in history].count("OperationResolved") == 1
    assert len(await runnable_tasks(store, wid)) == 1


async def test_resolving_twice_or_a_non_uncertain_op_is_an_error_that_changes_nothing(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    await store.resolve_uncertain(op.id, "retry", decided_by="a", resolved_event=RESOLVED)
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="already resolved 'retry' by a"):
        await store.resolve_uncertain(
            op.id, "fail", error="x", resolved_event=RESOLVED, outcome_event=("F", b"")
        )
    assert await snapshot(store, wid) == before
    wid2, active = await running_op(store)
    before2 = await snapshot(store, wid2)
    with pytest.raises(NotFoundError, match="is active, not uncertain"):
        await store.resolve_uncertain(active.id, "retry", resolved_event=RESOLVED)
    assert await snapshot(store, wid2) == before2
    with pytest.raises(NotFoundError, match="does not exist"):
        await store.resolve_uncertain(uuid.uuid4(), "retry", resolved_event=RESOLVED)


async def test_resolve_rejects_a_decision_without_its_outcome(store: PostgresStore) -> None:
    wid, op = await uncertain_op(store)
    before = await snapshot(store, wid)
    with pytest.raises(ValueError, match="unknown decision"):
        await store.resolve_uncertain(op.id, "maybe", resolved_event=RESOLVED)
    with pytest.raises(ValueError, match="needs its outcome_event"):
        await store.resolve_uncertain(op.id, "complete", result=b"1", resolved_event=RESOLVED)
    with pytest.raises(ValueError, match="result bytes"):
        await store.resolve_uncertain(
            op.id, "complete", resolved_event=RESOLVED, outcome_event=("C", b"")
        )
    assert await snapshot(store, wid) == before


async def test_resume_is_refused_while_an_operation_is_uncertain(store: PostgresStore) -> None:
    wid, op = await uncertain_op(store)
    with pytest.raises(ConflictError, match=str(op.id)):
        await store.resume_workflow(wid)
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.SUSPENDED


async def test_run_stays_suspended_until_its_last_uncertain_op_is_resolved(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    t = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        t.id,
        t.lease_token,
        wid,
        1,
        events=[("S", b""), ("S", b"")],
        operations=[op_params(wid, 1, idempotent=False), op_params(wid, 2, idempotent=False)],
    )
    ops = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
    )
    for op in ops:
        await store.mark_uncertain(op.id, op.lease_token, "x", event_type=UNCERTAIN, payload=b"")
    await store.resolve_uncertain(ops[0].id, "retry", resolved_event=RESOLVED)
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.SUSPENDED
    assert await runnable_tasks(store, wid) == []
    await store.resolve_uncertain(ops[1].id, "retry", resolved_event=RESOLVED)
    assert (await store.get_workflow_execution(wid)).state == WorkflowState.RUNNING
    assert len(await runnable_tasks(store, wid)) == 1


async def test_list_uncertain_operations_shows_workflow_activity_input_since_and_reason(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    await running_op(store)  # an active op is not listed
    (u,) = await store.list_uncertain_operations()
    assert (u.job_id, u.workflow_id, u.workflow_name) == (op.id, wid, "order")
    assert (u.kind, u.activity, u.execution_key) == ("$op:charge@1", "charge", f"{wid}/1")
    assert (u.input, u.reason, u.attempt) == (b'{"amount":42}', "gateway timeout", 1)
    assert u.since is not None
    assert await store.list_uncertain_operations(workflow_id=uuid.uuid4()) == []
    await store.resolve_uncertain(op.id, "retry", resolved_event=RESOLVED)
    assert await store.list_uncertain_operations() == []


async def test_late_success_before_any_decision_resolves_the_op_atomically(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    resolved = await store.accept_late_report(
        op.id,
        op.lease_token,  # type: ignore[arg-type]
        "ActivityCompleted",
        b'"charged"',
        resolved_event=RESOLVED,
        result=b'"charged"',
    )
    assert resolved == (wid, "order")
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["decision"], row["decision_by"]) == (
        "succeeded",
        "complete",
        "late report of attempt 1",
    )
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.RUNNING
    assert [e.type for e in state.history][-2:] == ["OperationResolved", "ActivityCompleted"]
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="already resolved 'complete'"):
        await store.resolve_uncertain(
            op.id, "fail", error="x", resolved_event=RESOLVED, outcome_event=("F", b"")
        )
    assert await snapshot(store, wid) == before


async def test_late_report_after_an_operator_decision_is_refused_and_changes_nothing(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    await store.resolve_uncertain(
        op.id, "fail", error="no charge", resolved_event=RESOLVED, outcome_event=("F", b"")
    )
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError, match="late report was not applied"):
        await store.accept_late_report(
            op.id,
            op.lease_token,  # type: ignore[arg-type]
            "ActivityCompleted",
            b"1",
            resolved_event=RESOLVED,
        )
    assert await snapshot(store, wid) == before


async def test_a_deliberate_release_of_a_non_idempotent_op_is_allowed(
    store: PostgresStore,
) -> None:
    wid, op = await running_op(store, idempotent=False)
    await store.release(op.id, op.lease_token)  # type: ignore[arg-type]
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["attempt"]) == ("pending", 0)


async def _decided(store: PostgresStore, result: bytes) -> tuple[uuid.UUID, Job]:
    wid, op = await uncertain_op(store)
    await store.resolve_uncertain(
        op.id, "complete", result, decided_by="old", resolved_event=RESOLVED,
        outcome_event=("ActivityCompleted", b'{"scheduled_seq":1}'),
    )  # fmt: skip
    return wid, op


async def _repark(store: PostgresStore, wid: uuid.UUID, result: bytes) -> int:
    return await store.repark_decided_operation(
        wid, f"{wid}/1", result, "does not fit",
        payload=lambda old: old + b" ", event_type=UNCERTAIN, event=b'{"seq":1,"again":1}',
    )  # fmt: skip


async def test_repark_decided_operation_parks_it_again_suspends_the_run_and_keeps_the_payload_given(
    store: PostgresStore,
) -> None:
    wid, op = await _decided(store, b"12345")
    before = (await store.load_workflow_task(wid)).execution.state
    assert before == WorkflowState.RUNNING
    old = bytes(await store.pool.fetchval("SELECT payload FROM azync_jobs WHERE id = $1", op.id))
    seq = await _repark(store, wid, b"12345")
    assert seq > 0
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert (row["state"], row["uncertain_reason"]) == ("uncertain", "does not fit")
    kept = await store.pool.fetchval("SELECT payload FROM azync_jobs WHERE id = $1", op.id)
    assert bytes(kept) == old + b" "
    state = await store.load_workflow_task(wid)
    assert state.execution.state == WorkflowState.SUSPENDED
    assert "does not fit" in state.suspend_reason
    assert f"{wid}/1" in state.suspend_reason
    assert state.history[-1].seq == seq
    (listed,) = await store.list_uncertain_operations(workflow_id=wid)
    assert listed.job_id == op.id
    # a new decision applies as to any uncertain operation
    done = await store.resolve_uncertain(
        op.id, "complete", b'"ok"', decided_by="ann", resolved_event=RESOLVED,
        outcome_event=("ActivityCompleted", b'{"scheduled_seq":1}'),
    )  # fmt: skip
    assert done.workflow_id == wid


async def test_repark_decided_operation_is_fenced_by_the_decided_result(
    store: PostgresStore,
) -> None:
    wid, op = await _decided(store, b'"fits"')
    assert await _repark(store, wid, b"12345") == 0  # decided anew: another result
    assert await _repark(store, uuid.uuid4(), b'"fits"') == 0
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op.id]
    assert row["state"] == "succeeded"
    assert (await store.load_workflow_task(wid)).execution.state == WorkflowState.RUNNING
