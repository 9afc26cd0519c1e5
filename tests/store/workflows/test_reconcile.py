"""Store verbs added for reconcile hooks and late reports: one verdict per
uncertain attempt, fenced; late outcomes kept in the ledger; resolve fenced by attempt."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.errors import ConflictError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres.workflows.uncertain import LATE_OUTCOME_EVENT
from azync_flow.store.queue import JobState, Source
from tests.store.workflow_helpers import RESOLVED, lease_op, lease_task, running_op, uncertain_op


async def test_unreconciled_lists_each_uncertain_attempt_until_a_verdict_is_recorded(
    store: PostgresStore,
) -> None:
    _wid, op = await uncertain_op(store)
    assert [u.job_id for u in await store.list_unreconciled_operations(["$op:charge@1"])] == [op.id]
    assert await store.list_unreconciled_operations(["$op:other@1"]) == []
    assert await store.record_reconcile_verdict(op.id, 1, "unknown: provider down")
    assert not await store.record_reconcile_verdict(op.id, 1, "unknown: again")  # once
    assert await store.list_unreconciled_operations(["$op:charge@1"]) == []
    assert not await store.record_reconcile_verdict(op.id, 2, "unknown")  # other attempt
    rows = await store.pool.fetch(
        "SELECT error FROM azync_job_attempts WHERE job_id = $1 AND error LIKE 'reconcile:%'",
        op.id,
    )
    assert [r["error"] for r in rows] == ["reconcile: unknown: provider down"]


async def test_a_verdict_is_not_recorded_for_an_operation_no_longer_uncertain(
    store: PostgresStore,
) -> None:
    _, op = await uncertain_op(store)
    await store.resolve_uncertain(op.id, "retry", resolved_event=RESOLVED)
    assert not await store.record_reconcile_verdict(op.id, 1, "unknown")
    _, active = await running_op(store)
    assert not await store.record_reconcile_verdict(active.id, 1, "unknown")


async def test_resolve_with_a_stale_expected_attempt_conflicts_and_changes_nothing(
    store: PostgresStore,
) -> None:
    _wid, op = await uncertain_op(store)
    with pytest.raises(ConflictError, match="not 7"):
        await store.resolve_uncertain(op.id, "retry", resolved_event=RESOLVED, expected_attempt=7)
    assert (await store.get_operation(op.id)).state == "uncertain"
    await store.resolve_uncertain(op.id, "retry", resolved_event=RESOLVED, expected_attempt=1)
    assert (await store.get_operation(op.id)).state == "pending"


async def test_record_late_outcome_keeps_the_payload_in_the_ledger_and_changes_nothing_else(
    store: PostgresStore,
) -> None:
    wid, op = await uncertain_op(store)
    before = await store.pool.fetchrow("SELECT state, decision FROM azync_jobs WHERE id=$1", op.id)
    event_id = await store.record_late_outcome(
        op.id, 1, "ActivityCompleted", b'{"result":"ch_1"}', why="resolved already"
    )
    row = await store.pool.fetchrow("SELECT * FROM azync_events WHERE id = $1", event_id)
    assert row["type"] == LATE_OUTCOME_EVENT
    assert bytes(row["payload"]) == b'{"result":"ch_1"}'
    assert row["aggregate_id"] == str(wid)
    after = await store.pool.fetchrow("SELECT state, decision FROM azync_jobs WHERE id=$1", op.id)
    assert tuple(after) == tuple(before)
    audit = await store.pool.fetchval(
        "SELECT error FROM azync_job_attempts WHERE job_id = $1 ORDER BY id DESC LIMIT 1", op.id
    )
    assert audit.startswith("late outcome ignored: ActivityCompleted of attempt 1")


async def test_get_operation_reads_any_state_and_unknown_ids_are_not_found(
    store: PostgresStore,
) -> None:
    from azync_flow.errors import NotFoundError

    wid, op = await running_op(store)
    got = await store.get_operation(op.id)
    assert (got.state, got.workflow_id, got.execution_key) == ("active", wid, f"{wid}/1")
    with pytest.raises(NotFoundError):
        await store.get_operation(uuid.uuid4())
    job = await store.get_job(Source.WORKFLOW, op.id)
    assert job.id == op.id


async def test_attempt_settlement_tells_where_the_attempt_holding_the_token_left_the_operation(
    store: PostgresStore,
) -> None:
    wid, op = await running_op(store, idempotent=True)
    token = op.lease_token
    assert token is not None
    assert await store.attempt_settlement(op.id, token) is None  # still active
    await store.reschedule(op.id, token, timedelta(0), "timeout")
    assert await store.attempt_settlement(op.id, token) == (JobState.SCHEDULED, "timeout")
    assert await store.attempt_settlement(op.id, uuid.uuid4()) is None  # not its token
    await store.promote_workflow_jobs()
    again = await lease_op(store, op.id)
    assert again.lease_token is not None
    assert await store.attempt_settlement(op.id, token) is None  # another attempt leased it
    await store.complete_operation(
        op.id, again.lease_token, wid, "ActivityFailed", b"{}", dead=True, last_error="boom"
    )
    assert await store.attempt_settlement(op.id, again.lease_token) == (JobState.DEAD, "boom")
    task = await lease_task(store, wid)  # a workflow task is no operation
    await store.ack(task.id, task.lease_token)  # type: ignore[arg-type]
    assert await store.attempt_settlement(task.id, task.lease_token) is None  # type: ignore[arg-type]


async def test_attempt_settlement_of_a_parked_attempt_until_a_decision_clears_its_token(
    store: PostgresStore,
) -> None:
    _, op = await uncertain_op(store)
    assert op.lease_token is not None
    parked = await store.attempt_settlement(op.id, op.lease_token)
    assert parked is not None
    assert parked[0] == JobState.UNCERTAIN  # parked under the attempt's token
    await store.resolve_uncertain(op.id, "retry", resolved_event=RESOLVED)
    assert await store.attempt_settlement(op.id, op.lease_token) is None
