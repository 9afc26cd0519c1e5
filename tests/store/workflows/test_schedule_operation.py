"""Contract clauses of ``WorkflowAdmin.schedule_operation`` (``ScheduleOperation``):
insert, or return the existing, operation job, deduplicated by execution key
among the execution's non-terminal jobs, with the pass commit's insert."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, JobState, Source
from tests.store.helpers import row, stat_sums
from tests.store.workflow_helpers import (
    LEASE,
    commit,
    finish,
    jobs_of,
    lease_op,
    op_params,
    started,
)


def _ops(jobs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [j for j in jobs if j["task_key"] != "$wft"]


async def test_schedule_operation_inserts_a_pending_operation_job_and_returns_its_id(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    p = op_params(wid, 1)
    job_id = await store.schedule_operation(p)
    r = await row(store, job_id)
    assert (r["source"], r["kind"], r["state"], r["run_id"], r["task_key"]) == (
        "workflow",
        "$op:charge@1",
        "pending",
        wid,
        p.execution_key,
    )
    assert bytes(r["payload"]) == p.payload
    assert msgspec.json.decode(r["meta"].encode()) == p.meta
    assert (r["max_attempts"], r["max_attempts_explicit"]) == (0, False)  # resolved at lease
    assert (await stat_sums(store, "$op:charge@1", Source.WORKFLOW))["enqueued"] == 1
    # a worker of the kind leases it, with the lease's default budget
    leased = await lease_op(store, job_id)
    assert (leased.attempt, leased.max_attempts) == (
        1,
        DequeueParams(kind="k", limit=1, lease=LEASE).default_max_attempts,
    )


async def test_schedule_operation_returns_the_live_job_of_the_key_and_inserts_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    first = await store.schedule_operation(op_params(wid, 1))
    before = await jobs_of(store, wid)
    again = op_params(wid, 1)
    again.payload = b'{"amount":99}'  # a different call of that key changes nothing
    assert await store.schedule_operation(again) == first
    assert await jobs_of(store, wid) == before
    assert (await stat_sums(store, "$op:charge@1", Source.WORKFLOW))["enqueued"] == 1


@pytest.mark.parametrize("state", ["active", "paused", "uncertain", "scheduled"])
async def test_every_non_terminal_state_dedupes(store: PostgresStore, state: str) -> None:
    wid = await started(store)
    job_id = await store.schedule_operation(op_params(wid, 1))
    await store.pool.execute("UPDATE azync_jobs SET state = $2 WHERE id = $1", job_id, state)
    assert await store.schedule_operation(op_params(wid, 1)) == job_id
    assert len(_ops(await jobs_of(store, wid))) == 1


@pytest.mark.parametrize("state", ["succeeded", "dead", "cancelled"])
async def test_an_ended_operation_of_the_key_does_not_dedupe(
    store: PostgresStore, state: str
) -> None:
    wid = await started(store)
    ended = await store.schedule_operation(op_params(wid, 1))
    await store.pool.execute("UPDATE azync_jobs SET state = $2 WHERE id = $1", ended, state)
    fresh = await store.schedule_operation(op_params(wid, 1))
    assert fresh != ended
    assert [j["state"] for j in _ops(await jobs_of(store, wid))] == [state, "pending"]


async def test_the_key_dedupes_within_one_execution_only(store: PostgresStore) -> None:
    a, b = await started(store), await started(store)
    p = op_params(a, 1)
    other = op_params(b, 1)
    other.execution_key = p.execution_key
    assert await store.schedule_operation(p) != await store.schedule_operation(other)


async def test_a_pass_scheduling_the_same_key_later_inserts_nothing(store: PostgresStore) -> None:
    wid = await started(store)
    job_id = await store.schedule_operation(op_params(wid, 1))
    await commit(store, wid, operations=[op_params(wid, 1)])
    assert [j["id"] for j in _ops(await jobs_of(store, wid))] == [job_id]


async def test_a_key_a_pass_scheduled_is_returned(store: PostgresStore) -> None:
    wid = await started(store)
    await commit(store, wid, operations=[op_params(wid, 1)])
    (op,) = _ops(await jobs_of(store, wid))
    assert await store.schedule_operation(op_params(wid, 1)) == op["id"]


async def test_concurrent_calls_with_one_key_end_with_one_job(store: PostgresStore) -> None:
    wid = await started(store)
    ids = await asyncio.gather(*(store.schedule_operation(op_params(wid, 1)) for _ in range(8)))
    assert len(set(ids)) == 1
    assert [j["id"] for j in _ops(await jobs_of(store, wid))] == [ids[0]]


async def test_a_future_run_at_schedules_it_and_routing_is_kept(store: PostgresStore) -> None:
    wid = await started(store)
    p = op_params(wid, 1)
    p.run_at = await store.current_time() + timedelta(hours=1)
    p.max_attempts, p.task_queue, p.priority = 3, "gpu", 7
    p.schedule_to_close = timedelta(minutes=90)
    r = await row(store, await store.schedule_operation(p))
    assert (r["state"], r["run_at"], r["max_attempts"]) == ("scheduled", p.run_at, 3)
    assert (r["task_queue"], r["priority"]) == ("gpu", 7)
    assert r["close_deadline"] is not None  # the deadline trigger read the timeout


async def test_a_missing_execution_is_not_found(store: PostgresStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match=f"{missing} does not exist"):
        await store.schedule_operation(op_params(missing, 1))
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 0


async def test_a_finished_execution_is_not_found_and_gets_no_job(store: PostgresStore) -> None:
    wid = await started(store)
    await finish(store, wid, ("complete", b"1"))
    with pytest.raises(NotFoundError, match=r"is succeeded \(finished\); operation"):
        await store.schedule_operation(op_params(wid, 1))
    assert _ops(await jobs_of(store, wid)) == []


async def test_a_suspended_execution_still_gets_its_operation(store: PostgresStore) -> None:
    wid = await started(store)
    await finish(store, wid, ("suspend", "hold"))
    assert (await store.get_workflow_execution(wid)).state == "suspended"
    job_id = await store.schedule_operation(op_params(wid, 1))
    assert (await row(store, job_id))["state"] == JobState.PENDING


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "", "operation kind must not be empty"),
        ("execution_key", "", "operation execution_key must not be empty"),
        ("execution_key", "k\x00", "must not contain NUL"),
        ("meta", {"a": "b\x00"}, "must not contain NUL"),
        ("max_attempts", -1, "operation max_attempts must be >= 1"),
        ("priority", 10**9, "priority"),
        ("schedule_to_start", timedelta(0), "schedule_to_start"),
    ],
)
async def test_a_malformed_operation_is_refused_and_nothing_written(
    store: PostgresStore, field: str, value: object, message: str
) -> None:
    wid = await started(store)
    p = op_params(wid, 1)
    setattr(p, field, value)
    with pytest.raises(ValueError, match=message):
        await store.schedule_operation(p)
    assert _ops(await jobs_of(store, wid)) == []
