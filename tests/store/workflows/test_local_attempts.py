"""A locally dispatched attempt on real PostgreSQL: a row of its own table while
it runs, its operation's one job row once it succeeded, and handed back to the
job table as it stands by every other path (a settle, a renewal, an expired
lease, a take-back, terminate, continue-as-new, a failed or kept pass)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, Job, Source
from azync_flow.store.workflows import OperationLease, OperationSettle, PassWrite
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    jobs_of,
    lease_task,
    op_params,
    started,
)

EXPIRE = LEASE + timedelta(seconds=1)


async def local_rows(store: PostgresStore, run_id: uuid.UUID) -> list[dict[str, object]]:
    rows = await store.pool.fetch(
        "SELECT id, task_key, lease_token, lease_until, attempt"
        " FROM azync_workflow_local_attempts WHERE run_id = $1",
        run_id,
    )
    return [dict(r) for r in rows]


async def op_rows(store: PostgresStore, run_id: uuid.UUID) -> list[dict[str, object]]:
    return [r for r in await jobs_of(store, run_id) if r["task_key"] != "$wft" and not r["local"]]


async def dispatched(
    store: PostgresStore, *, idempotent: bool = True, meta: dict[str, str] | None = None
) -> tuple[uuid.UUID, Job]:
    """A running execution whose first pass leased operation seq 1 to the caller."""
    wid = await started(store)
    task = await lease_task(store, wid)
    op = op_params(wid, 1, idempotent=idempotent)
    op.meta.update(meta or {})
    write = PassWrite(
        expected_next_seq=1,
        events=[("ActivityScheduled", b"{}")],
        operations=[op],
        local=OperationLease(keys=[op.execution_key], lease=LEASE, default_max_attempts=7),
    )
    assert task.lease_token is not None
    [job] = (await store.commit_pass(task.id, task.lease_token, wid, write)).leased
    return wid, job


def settle(job: Job, **kw: object) -> OperationSettle:
    assert job.lease_token is not None
    return OperationSettle(
        job_id=job.id,
        lease_token=job.lease_token,
        event_type=str(kw.pop("event_type", "ActivityCompleted")),
        payload=b'{"r":1}',
        **kw,  # type: ignore[arg-type]
    )


async def test_a_running_local_attempt_is_no_job_row_and_its_success_writes_one(
    store: PostgresStore, clock: MovableClock
) -> None:
    at = clock.advance(timedelta(0))
    wid, job = await dispatched(store)
    [row] = await local_rows(store, wid)
    assert (row["id"], row["lease_token"], row["attempt"]) == (job.id, job.lease_token, 1)
    assert row["lease_until"] == at + LEASE
    assert await op_rows(store, wid) == []

    await store.commit_completions(wid, [settle(job)], PassWrite(expected_next_seq=2))
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["id"], op["state"], op["attempt"], op["lease_token"]) == (
        job.id,
        "succeeded",
        1,
        job.lease_token,
    )
    history = await store.list_history(wid)
    assert [e.type for e in history] == ["ActivityScheduled", "ActivityCompleted"]


async def test_an_operation_a_limit_or_deadline_tracks_stays_a_job_row(
    store: PostgresStore,
) -> None:
    wid, job = await dispatched(store, meta={"schedule_to_close_s": "60"})
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["id"], op["state"]) == (job.id, "active")


async def test_a_renewal_hands_the_attempt_back_with_its_lease(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, job = await dispatched(store)
    assert job.lease_token is not None
    clock.advance(timedelta(seconds=5))
    await store.extend_lease(job.id, job.lease_token, LEASE)
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["id"], op["state"], op["lease_token"]) == (job.id, "active", job.lease_token)
    # its success is still recorded by the next pass, from the job row
    await store.commit_completions(wid, [settle(job)], PassWrite(expected_next_seq=2))
    assert [r["state"] for r in await op_rows(store, wid)] == ["succeeded"]


async def test_a_failure_folded_into_a_pass_dead_letters_the_handed_back_attempt(
    store: PostgresStore,
) -> None:
    wid, job = await dispatched(store)
    failed = settle(job, event_type="ActivityFailed", dead=True, last_error="boom")
    await store.commit_completions(
        wid, [failed], PassWrite(expected_next_seq=2, outcome=("fail", "ValueError: boom"))
    )
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["state"], op["last_error"]) == ("dead", "boom")


async def test_a_worker_settle_finds_a_local_attempt_and_a_stale_token_none(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, job = await dispatched(store)
    with pytest.raises(NotFoundError):
        await store.reschedule(job.id, uuid.uuid4(), timedelta(seconds=2), "stale")
    assert len(await local_rows(store, wid)) == 1  # a stale token moves nothing
    assert job.lease_token is not None
    await store.reschedule(job.id, job.lease_token, timedelta(seconds=2), "ConnectionError")
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["state"], op["last_error"]) == ("scheduled", "ConnectionError")


async def test_an_expired_local_attempt_is_reaped_as_a_job_row(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, job = await dispatched(store)
    assert await store.reap_expired_operations(lambda j, r: ("ActivityFailed", b"{}")) == (0, 0)
    assert len(await local_rows(store, wid)) == 1  # its lease still runs

    clock.advance(EXPIRE)
    assert await store.reap_expired_operations(lambda j, r: ("ActivityFailed", b"{}")) == (1, 0)
    assert await local_rows(store, wid) == []
    (again,) = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=10, lease=LEASE)
    )
    assert (again.id, again.attempt, again.reap_count) == (job.id, 2, 1)


async def test_an_expired_non_idempotent_local_attempt_turns_uncertain(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, job = await dispatched(store, idempotent=False)
    clock.advance(EXPIRE)
    marked = await store.reap_uncertain_operations(lambda j, r: ("OperationUncertain", b"{}"))
    assert marked == [job.id]
    [op] = await op_rows(store, wid)
    assert op["state"] == "uncertain"


async def test_a_running_local_attempt_keeps_its_execution_off_the_stalled_list(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    wid, _ = await dispatched(store)
    clock.advance(timedelta(hours=1))
    assert wid not in [s.id for s in await store.list_stalled_workflows(timedelta(minutes=5), 100)]


async def test_terminate_cancels_a_running_local_attempt(store: PostgresStore) -> None:
    wid, job = await dispatched(store)
    await store.terminate_workflow(wid, "ops", "tester", ("WorkflowTerminated", b"{}"))
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert op["state"] == "cancelled"
    assert job.lease_token is not None
    with pytest.raises(NotFoundError):  # the attempt learns at its next renewal
        await store.extend_lease(job.id, job.lease_token, LEASE)


async def test_continue_as_new_cancels_a_running_local_attempt(store: PostgresStore) -> None:
    wid, job = await dispatched(store)
    await _continue(store, wid)
    assert await local_rows(store, wid) == []
    [op] = await op_rows(store, wid)
    assert (op["id"], op["state"]) == (job.id, "cancelled")


async def _continue(store: PostgresStore, wid: uuid.UUID) -> None:
    await store.schedule_task(wid)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    await store.commit_pass(
        task.id,
        task.lease_token,
        wid,
        PassWrite(expected_next_seq=2, outcome=("continue", b'{"n":2}', uuid.uuid4(), False)),
    )


@pytest.fixture
async def restarted(pg_dsn: str, schema: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    """A second store on the same schema and clock (the worker after a restart)."""
    s = await open_store(pg_dsn, Config(schema=schema), migrate=False, clock=clock)
    try:
        yield s
    finally:
        await s.close()


async def test_a_restarted_worker_takes_back_its_local_attempts(
    store: PostgresStore, restarted: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    await store.claim_worker_identity("w-local")
    wid, job = await dispatched(store)
    await store.drop_identity()  # the process died: its identity is free again

    taken = await restarted.claim_worker_identity("w-local")
    assert taken.taken_back == (1, 0)
    [row] = await local_rows(store, wid)
    assert row["lease_until"] == clock()
    clock.advance(timedelta(milliseconds=1))
    assert await restarted.reap_expired_operations(lambda j, r: ("F", b"")) == (1, 0)
    [op] = await op_rows(store, wid)
    assert (op["id"], op["state"]) == (job.id, "pending")
