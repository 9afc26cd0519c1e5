"""Helpers shared by the workflow store tests (real PostgreSQL, no mocks)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Job, Source
from azync_flow.store.workflows import (
    Outcome,
    PassWrite,
    ScheduleOperationParams,
    WorkflowStartParams,
)

LEASE = timedelta(seconds=30)


def start_params(
    name: str = "order", key: str = "", input: bytes = b'{"n":1}'
) -> WorkflowStartParams:
    return WorkflowStartParams(
        id=uuid.uuid4(), name=name, input=input, version="1", business_idempotency_key=key
    )


async def started(store: PostgresStore, **kw: object) -> uuid.UUID:
    p = start_params(**kw)  # type: ignore[arg-type]
    inserted, wid = await store.start_workflow(p)
    assert inserted
    return wid


async def lease_task(store: PostgresStore, run_id: uuid.UUID) -> Job:
    """Lease the (only) due workflow task of ``run_id``; tasks of other runs leased
    on the way are released again."""
    leased = [t.job for t in await store.lease_workflow_tasks(100, LEASE)]
    for j in leased:
        if j.run_id != run_id:
            await store.release(j.id, j.lease_token)  # type: ignore[arg-type]
    jobs = [j for j in leased if j.run_id == run_id]
    assert len(jobs) == 1, jobs
    return jobs[0]


async def commit(store: PostgresStore, run_id: uuid.UUID, **write: Any) -> int:
    """Commit one pass of ``run_id`` the way the runtime does: make its workflow
    task due (``schedule_task`` merges into a runnable one), lease it, read the
    ``next_seq`` and ``commit_pass`` the ``PassWrite`` fields ``write``.

    The one path by which history, operations and outcomes are written.
    Returns the execution's new ``next_seq``.
    """
    await store.schedule_task(run_id)
    task = await lease_task(store, run_id)
    state = await store.load_workflow_task(run_id)
    write.setdefault("cancel_known", state.cancel_requested)  # told at load, as a pass is
    result = await store.commit_pass(
        task.id,
        task.lease_token,  # type: ignore[arg-type]
        run_id,
        PassWrite(expected_next_seq=state.next_seq, **write),
    )
    return result.next_seq


async def finish(store: PostgresStore, run_id: uuid.UUID, outcome: Outcome) -> None:
    """End (or suspend) ``run_id`` by a pass outcome: ``("complete", result)``,
    ``("fail", reason)``, ``("suspend", reason)`` ..."""
    await commit(store, run_id, outcome=outcome)


async def scheduled_op(
    store: PostgresStore, run_id: uuid.UUID, seq: int = 1, **kw: Any
) -> uuid.UUID:
    """Operation ``seq`` of ``run_id`` scheduled by a pass of its own (no event,
    so the history is left as it was); ``kw`` as :func:`op_params`. Returns the
    job id (the live one of that execution key)."""
    await commit(store, run_id, operations=[op_params(run_id, seq, **kw)])
    job_id = await store.pool.fetchval(
        "SELECT id FROM azync_jobs WHERE run_id = $1 AND task_key = $2"
        " AND state NOT IN ('succeeded', 'dead', 'cancelled')",
        run_id,
        f"{run_id}/{seq}",
    )
    assert isinstance(job_id, uuid.UUID)
    return job_id


async def lease_op(store: PostgresStore, op_id: uuid.UUID, activity: str = "charge") -> Job:
    """Lease the pending operation ``op_id`` (others leased on the way are released)."""
    leased = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind=f"$op:{activity}@1", limit=100, lease=LEASE)
    )
    for other in leased:
        if other.id != op_id:
            await store.release(other.id, other.lease_token)  # type: ignore[arg-type]
    (op,) = [j for j in leased if j.id == op_id]
    return op


def op_params(
    run_id: uuid.UUID, seq: int, idempotent: bool = True, activity: str = "charge"
) -> ScheduleOperationParams:
    return ScheduleOperationParams(
        workflow_id=run_id,
        kind=f"$op:{activity}@1",
        payload=b'{"amount":42}',
        execution_key=f"{run_id}/{seq}",
        meta={
            "workflow_name": "order",
            "activity": activity,
            "idempotent": "true" if idempotent else "false",
        },
    )


async def jobs_of(store: PostgresStore, run_id: uuid.UUID) -> list[dict[str, object]]:
    rows = await store.pool.fetch(
        "SELECT id, kind, task_key, state, run_at, attempt, lease_token, decision, decision_by,"
        " decision_note, decided_at, uncertain_reason, uncertain_since, result, last_error"
        " FROM azync_jobs WHERE run_id = $1 ORDER BY enqueued_at, id",
        run_id,
    )
    return [dict(r) for r in rows]


async def runnable_tasks(store: PostgresStore, run_id: uuid.UUID) -> list[dict[str, object]]:
    return [
        j
        for j in await jobs_of(store, run_id)
        if j["task_key"] == "$wft" and j["state"] in ("pending", "scheduled")
    ]


async def snapshot(store: PostgresStore, run_id: uuid.UUID) -> dict[str, object]:
    """Everything the store holds about one execution (to prove 'nothing changed')."""
    ex = await store.pool.fetchrow("SELECT * FROM azync_workflow_executions WHERE id = $1", run_id)
    hist = await store.pool.fetch(
        "SELECT seq, type, payload FROM azync_workflow_history WHERE workflow_id = $1 ORDER BY seq",
        run_id,
    )
    sigs = await store.pool.fetch(
        "SELECT * FROM azync_workflow_signals WHERE workflow_id = $1 ORDER BY id", run_id
    )
    timers = await store.pool.fetch(
        "SELECT * FROM azync_workflow_timers WHERE workflow_id = $1 ORDER BY seq", run_id
    )
    jobs = await store.pool.fetch("SELECT * FROM azync_jobs WHERE run_id = $1 ORDER BY id", run_id)
    attempts = await store.pool.fetch(
        "SELECT a.* FROM azync_job_attempts a JOIN azync_jobs j ON j.id = a.job_id"
        " WHERE j.run_id = $1 ORDER BY a.id",
        run_id,
    )
    return {
        "execution": dict(ex) if ex else None,
        "history": [tuple(r) for r in hist],
        "signals": [dict(r) for r in sigs],
        "timers": [dict(r) for r in timers],
        "jobs": [dict(r) for r in jobs],
        "attempts": [dict(r) for r in attempts],
    }


UNCERTAIN = "OperationUncertain"
RESOLVED = ("OperationResolved", b'{"decision":"x"}')


async def running_op(
    store: PostgresStore, idempotent: bool = False, activity: str = "charge"
) -> tuple[uuid.UUID, Job]:
    """A running execution whose first pass scheduled one operation, now leased."""
    wid = await started(store)
    t = await lease_task(store, wid)
    await commit_workflow_task(
        store,
        t.id,
        t.lease_token,
        wid,
        1,
        events=[("ActivityScheduled", b'{"seq":1}')],
        operations=[op_params(wid, 1, idempotent=idempotent, activity=activity)],
    )
    leased = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind=f"$op:{activity}@1", limit=10, lease=LEASE)
    )
    for other in leased:
        if other.run_id != wid:
            await store.release(other.id, other.lease_token)  # type: ignore[arg-type]
    (op,) = [j for j in leased if j.run_id == wid]
    return wid, op


async def uncertain_op(store: PostgresStore) -> tuple[uuid.UUID, Job]:
    wid, op = await running_op(store)
    await store.mark_uncertain(
        op.id, op.lease_token, "gateway timeout", event_type=UNCERTAIN, payload=b'{"seq":1}'
    )
    return wid, op


async def commit_workflow_task(
    store: PostgresStore,
    job_id: uuid.UUID,
    lease_token: uuid.UUID,
    run_id: uuid.UUID,
    expected_next_seq: int,
    *,
    next_task_at: Any = None,
    keep_lease: timedelta | None = None,
    **fields: Any,
) -> int:
    """``commit_pass`` with the pass given field by field (``PassWrite``'s
    fields as keywords); the execution's new ``next_seq``."""
    for name in ("events", "operations", "timers", "consumed_signals", "fired_timers"):
        if name in fields:
            fields[name] = list(fields[name])
    if fields.get("awaited_signals") is not None:
        fields["awaited_signals"] = list(fields["awaited_signals"])
    write = PassWrite(expected_next_seq=expected_next_seq, **fields)
    result = await store.commit_pass(
        job_id, lease_token, run_id, write, next_task_at=next_task_at, keep_lease=keep_lease
    )
    return result.next_seq
