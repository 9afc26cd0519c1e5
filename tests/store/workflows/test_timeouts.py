"""Timeouts in the workflow store (real PostgreSQL, clock moved by the testing
kit): ``time_out_workflows`` ends the executions past their execution or run
deadline as terminate ends one (but ``failed``), ``time_out_operations`` fails
the operations past their schedule-to-start or schedule-to-close deadline; the
due scans are index scans that never read rows without a deadline."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres._queries import QUERIES
from azync_flow.store.queue import DequeueParams, EnqueueParams, Job, LimitSpec, Source
from azync_flow.store.workflows import (
    OperationSettle,
    PassWrite,
    WorkflowStartParams,
    WorkflowState,
)
from azync_flow.testing import MovableClock

from ..workflow_helpers import (
    LEASE,
    commit_workflow_task,
    jobs_of,
    lease_op,
    lease_task,
    op_params,
    started,
)

EVENT = ("WorkflowTimedOut", b'{"type":"WorkflowTimedOut"}')


def _encode_workflow(kind: str, timeout: timedelta) -> tuple[str, bytes]:
    return EVENT[0], json.dumps({"kind": kind, "s": timeout.total_seconds()}).encode()


def _encode_op(job: Job, kind: str, timeout: timedelta) -> tuple[str, bytes]:
    return "ActivityFailed", json.dumps({"kind": kind, "s": timeout.total_seconds()}).encode()


async def _start(store: PostgresStore, **timeouts: timedelta) -> uuid.UUID:
    p = WorkflowStartParams(id=uuid.uuid4(), name="order", input=b"1", **timeouts)
    assert (await store.start_workflow(p))[0]
    return p.id


async def test_time_out_workflows_ends_only_executions_past_a_deadline(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    by_execution = await _start(store, execution_timeout=timedelta(minutes=1))
    by_run = await _start(store, run_timeout=timedelta(minutes=3))
    later = await _start(store, execution_timeout=timedelta(hours=1))
    untimed = await started(store)
    assert await store.time_out_workflows(_encode_workflow) == []
    clock.advance(timedelta(minutes=2))
    (ended,) = await store.time_out_workflows(_encode_workflow)
    assert (ended.id, ended.kind) == (by_execution, "execution")
    assert ended.timeout == timedelta(minutes=1)
    assert ended.previous_state == WorkflowState.RUNNING
    clock.advance(timedelta(minutes=2))
    assert [(e.id, e.kind) for e in await store.time_out_workflows(_encode_workflow)] == [
        (by_run, "run")
    ]
    view = await store.get_workflow_execution(by_run)
    assert view.state == WorkflowState.FAILED
    assert view.failure_reason == "WorkflowTimeoutError: run timeout of 180s elapsed"
    history = await store.list_history(by_run)
    assert [(h.seq, h.type, json.loads(h.payload)) for h in history] == [
        (1, "WorkflowTimedOut", {"kind": "run", "s": 180.0})
    ]
    assert {j["state"] for j in await jobs_of(store, by_run)} == {"cancelled"}
    for live in (later, untimed):
        assert (await store.get_workflow_execution(live)).state == WorkflowState.RUNNING
    assert await store.time_out_workflows(_encode_workflow) == []  # each ends once


async def test_a_timed_out_execution_fences_the_holder_of_its_task(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid = await _start(store, execution_timeout=timedelta(seconds=30))
    task = await lease_task(store, wid)
    clock.advance(timedelta(minutes=1))
    assert [e.id for e in await store.time_out_workflows(_encode_workflow)] == [wid]
    with pytest.raises(NotFoundError):
        await commit_workflow_task(
            store, task.id, task.lease_token, wid, 1, events=[("ActivityScheduled", b"{}")]
        )
    assert len(await store.list_history(wid)) == 1  # only the timeout's event


async def _with_op(store: PostgresStore, **deadlines: timedelta) -> tuple[uuid.UUID, uuid.UUID]:
    wid = await started(store)
    task = await lease_task(store, wid)
    op = op_params(wid, 1)
    for name, value in deadlines.items():
        setattr(op, name, value)
    await commit_workflow_task(
        store, task.id, task.lease_token, wid, 1, events=[("ActivityScheduled", b"{}")],
        operations=[op],
    )  # fmt: skip
    op_id = await store.pool.fetchval(
        "SELECT id FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", wid
    )
    return wid, op_id


async def test_time_out_operations_fails_an_unleased_call_past_its_schedule_to_start(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, op_id = await _with_op(store, schedule_to_start=timedelta(minutes=1))
    started_wid, started_op = await _with_op(store, schedule_to_start=timedelta(minutes=1))
    await lease_op(store, started_op)  # leased in time: the deadline no longer applies
    clock.advance(timedelta(minutes=2))
    (failed,) = await store.time_out_operations(_encode_op)
    assert (failed.job.id, failed.kind, failed.timeout) == (
        op_id,
        "schedule_to_start",
        timedelta(minutes=1),
    )
    (op,) = [j for j in await jobs_of(store, wid) if j["id"] == op_id]
    assert (op["state"], op["attempt"]) == ("dead", 0)
    assert op["last_error"] == "ActivityTimeoutError: schedule_to_start timeout of 60s elapsed"
    history = await store.list_history(wid)
    assert history[-1].type == "ActivityFailed"
    assert json.loads(history[-1].payload) == {"kind": "schedule_to_start", "s": 60.0}
    # the execution has a pass to run to see it
    jobs = await jobs_of(store, wid)
    assert any(j["task_key"] == "$wft" and j["state"] == "pending" for j in jobs)
    assert await store.time_out_operations(_encode_op) == []
    (kept,) = [j for j in await jobs_of(store, started_wid) if j["id"] == started_op]
    assert kept["state"] == "active"


async def test_time_out_operations_takes_a_running_attempt_past_its_schedule_to_close(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, op_id = await _with_op(store, schedule_to_close=timedelta(minutes=5))
    op = await lease_op(store, op_id)
    clock.advance(timedelta(minutes=4))
    assert await store.time_out_operations(_encode_op) == []
    clock.advance(timedelta(minutes=2))
    assert [(f.job.id, f.kind) for f in await store.time_out_operations(_encode_op)] == [
        (op_id, "schedule_to_close")
    ]
    with pytest.raises(NotFoundError):  # the attempt lost its fence
        await store.complete_operation(
            op.id,
            op.lease_token,
            wid,
            "ActivityCompleted",
            b"{}",  # type: ignore[arg-type]
        )
    assert [h.type for h in await store.list_history(wid)] == [
        "ActivityScheduled",
        "ActivityFailed",
    ]


@pytest.mark.parametrize("report", ["completed", "failed", "folded"])
async def test_a_report_after_the_schedule_to_close_deadline_is_refused_and_the_call_times_out(
    store: PostgresStore, clock: MovableClock, report: str
) -> None:
    clock.advance(timedelta(0))
    wid, op_id = await _with_op(store, schedule_to_close=timedelta(minutes=5))
    op = await lease_op(store, op_id)
    assert op.lease_token is not None
    clock.advance(timedelta(minutes=5, seconds=1))  # before the maintenance tick
    settle = OperationSettle(
        job_id=op.id, lease_token=op.lease_token, event_type="ActivityCompleted", payload=b"{}"
    )
    report_it = (
        store.commit_completions(wid, [settle], PassWrite(expected_next_seq=2))
        if report == "folded"
        else store.complete_operation(
            op.id,
            op.lease_token,
            wid,
            "ActivityCompleted",
            b"{}",
            dead=report == "failed",
            last_error="boom",
        )
    )
    with pytest.raises(NotFoundError, match="after its schedule-to-close deadline"):
        await report_it
    assert [h.type for h in await store.list_history(wid)] == ["ActivityScheduled"]
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op_id]
    assert (row["state"], row["lease_token"]) == ("active", op.lease_token)
    assert [(f.job.id, f.kind) for f in await store.time_out_operations(_encode_op)] == [
        (op_id, "schedule_to_close")
    ]
    assert [h.type for h in await store.list_history(wid)] == [
        "ActivityScheduled",
        "ActivityFailed",
    ]


async def test_a_report_before_the_schedule_to_close_deadline_is_accepted(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, op_id = await _with_op(store, schedule_to_close=timedelta(minutes=5))
    op = await lease_op(store, op_id)
    clock.advance(timedelta(minutes=4, seconds=59))
    await store.complete_operation(op.id, op.lease_token, wid, "ActivityCompleted", b"{}")  # type: ignore[arg-type]
    (row,) = [j for j in await jobs_of(store, wid) if j["id"] == op_id]
    assert row["state"] == "succeeded"


async def _dequeue_charge(store: PostgresStore) -> list[Job]:
    return await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
    )


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "limited"])
async def test_a_call_past_a_deadline_is_not_leased_before_it_times_out(
    store: PostgresStore, clock: MovableClock, limited: bool
) -> None:
    clock.advance(timedelta(0))
    _, to_start = await _with_op(store, schedule_to_start=timedelta(minutes=1))
    _, to_close = await _with_op(store, schedule_to_close=timedelta(minutes=1))
    _, in_time = await _with_op(store, schedule_to_close=timedelta(hours=1))
    if limited:  # the waiting calls are keyed "" and leased through the limit's slots
        await store.declare_limits(
            Source.WORKFLOW,
            "$op:charge@1",
            [LimitSpec(name="few", type="concurrency", capacity=10)],
        )
    clock.advance(timedelta(minutes=1))  # both deadlines reached; no tick ran yet
    assert [j.id for j in await _dequeue_charge(store)] == [in_time]
    timed_out = await store.time_out_operations(_encode_op)
    assert sorted(f.job.id for f in timed_out) == sorted([to_start, to_close])


async def test_a_queue_job_meta_naming_a_deadline_sets_none(store: PostgresStore) -> None:
    job_id = uuid.uuid4()
    meta = {"schedule_to_close_s": "not a number", "schedule_to_start_s": "1"}
    await store.enqueue(EnqueueParams(id=job_id, kind="email", payload=b"{}", meta=meta))
    row = await store.pool.fetchrow(
        "SELECT start_deadline, close_deadline FROM azync_jobs WHERE id = $1", job_id
    )
    assert (row["start_deadline"], row["close_deadline"]) == (None, None)


def _scans(plan: Any, relation: str) -> list[tuple[str, str]]:
    found = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == relation:
            found.append((node["Node Type"], node.get("Index Name", "")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


async def test_the_due_scans_read_only_rows_with_a_deadline_on_100k_rows(
    store: PostgresStore,
) -> None:
    async with store.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO azync_workflow_executions (id, name, state, input, created_at,
                                                      updated_at)
               SELECT gen_random_uuid(), 'order', 'running', '1', now(), now()
               FROM generate_series(1, 100000) g"""
        )
        await conn.execute(
            """INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,
                                       run_id, task_key)
               SELECT gen_random_uuid(), 'workflow', '$op:charge@1', 'pending', now(), now(),
                      now(), e.id, e.id::text || '/1'
               FROM azync_workflow_executions e"""
        )
        await conn.execute("ANALYZE azync_jobs")
        await conn.execute("ANALYZE azync_workflow_executions")
        executions = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) " + QUERIES["workflow_timeouts_due"], None, 100
        )
        operations = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) " + QUERIES["workflow_op_deadlines_due"], None, 100
        )
    assert _scans(json.loads(executions), "azync_workflow_executions") == [
        ("Index Scan", "azync_workflow_executions_timeout")
    ]
    assert sorted(_scans(json.loads(operations), "azync_jobs")) == [
        ("Index Scan", "azync_jobs_close_deadline"),
        ("Index Scan", "azync_jobs_start_deadline"),
    ]
