"""Contract clauses of the queue admin surface and the vacuum verbs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.admin import JobFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, JobState, Source
from azync_flow.testing import MovableClock
from tests.store.dag_helpers import create, params, task
from tests.store.helpers import enqueue_and_lease, job, lease, row
from tests.store.workflow_helpers import (
    LEASE,
    commit_workflow_task,
    lease_task,
    op_params,
    started,
)


async def _dead(store: PostgresStore, kind: str = "k", **kw: object) -> uuid.UUID:
    j = await enqueue_and_lease(store, kind, **kw)
    await store.dead(j.id, j.lease_token, "boom")
    return j.id


async def test_list_kinds_from_jobs_and_stat_history_sorted(store: PostgresStore) -> None:
    for kind in ("b", "a"):
        await store.enqueue(job(kind))
    c = job("c")
    await store.enqueue(c)
    await store.delete_job(Source.QUEUE, c.id, JobState.PENDING)  # stats still remember "c"
    await store.pool.execute(
        "INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at)"
        " VALUES (gen_random_uuid(), 'dag', 'z', 'pending', now(), now(), now())"
    )
    assert await store.list_kinds(Source.QUEUE) == ["a", "b", "c"]
    assert await store.list_kinds(Source.DAG) == ["z"]


async def test_kind_depths_counts_states_and_oldest_pending_age(
    store: PostgresStore, clock: MovableClock
) -> None:
    start = clock.advance(timedelta(0))
    await store.enqueue(job("a"))
    await store.enqueue(job("a", delay=timedelta(hours=1)))
    await enqueue_and_lease(store, "b")
    await _dead(store, "c")
    clock.set(start + timedelta(minutes=3))
    depths = await store.kind_depths(Source.QUEUE)
    assert set(depths) == {"a", "b", "c"}
    a = depths["a"]
    assert (a.pending, a.scheduled, a.active, a.dead) == (1, 1, 0, 0)
    assert a.oldest_pending_age == timedelta(minutes=3)
    assert depths["b"].active == 1
    assert depths["b"].oldest_pending_age == timedelta(0)
    assert depths["c"].dead == 1


async def test_stats_returns_depths_and_daily_window_oldest_first(
    store: PostgresStore, clock: MovableClock
) -> None:
    today = clock.advance(timedelta(0))
    await store.enqueue(job("a"))
    clock.set(today - timedelta(days=2))
    await store.enqueue(job("a", delay=timedelta(days=5)))
    clock.set(today)
    depths, daily = await store.stats(Source.QUEUE, "a")
    assert (depths.pending, depths.scheduled) == (1, 1)
    assert len(daily) == 30
    assert daily == sorted(daily, key=lambda d: d.date)
    assert daily[-1].date == datetime(today.year, today.month, today.day, tzinfo=UTC)
    assert [d.enqueued for d in daily[-3:]] == [1, 0, 1]
    empty_depths, empty_daily = await store.stats(Source.QUEUE, "unknown")
    assert empty_depths.pending == 0
    assert sum(d.enqueued for d in empty_daily) == 0


async def test_daily_stats_count_enqueued_processed_failed_reaped(
    store: PostgresStore, clock: MovableClock
) -> None:
    ok = await enqueue_and_lease(store, "a")
    await store.ack(ok.id, ok.lease_token)
    skipped = await enqueue_and_lease(store, "a")
    await store.skip(skipped.id, skipped.lease_token, "no-op")
    await _dead(store, "b")
    await enqueue_and_lease(store, "b")
    clock.advance(timedelta(minutes=1))
    assert await store.reap_expired(Source.QUEUE, None, 1) == (1, 1)
    today = (await store.all_daily(Source.QUEUE))[-1]
    assert (today.enqueued, today.processed, today.failed, today.reaped) == (4, 2, 2, 1)
    _, a_daily = await store.stats(Source.QUEUE, "a")
    assert (a_daily[-1].enqueued, a_daily[-1].processed, a_daily[-1].failed) == (2, 2, 0)


async def test_list_jobs_orders_per_state_filter(store: PostgresStore, clock: MovableClock) -> None:
    t0 = clock.advance(timedelta(0))
    ids = []
    for i in range(3):  # enqueued in order, scheduled in reverse order
        clock.set(t0 + timedelta(seconds=i))
        p = job(delay=timedelta(hours=3 - i))
        await store.enqueue(p)
        ids.append(p.id)

    async def page(state: JobState | None) -> list[uuid.UUID]:
        jobs, total = await store.list_jobs(Source.QUEUE, JobFilter(state=state), 0, 10)
        assert total == len(jobs)
        return [j.id for j in jobs]

    assert await page(JobState.SCHEDULED) == ids[::-1]  # run_at ascending
    assert await page(None) == ids[::-1]  # enqueued_at descending
    clock.set(t0 + timedelta(hours=4))
    await store.promote_due(Source.QUEUE)
    assert await page(JobState.PENDING) == ids  # enqueued_at ascending
    leased = {}
    for i in (2, 0, 1):  # leased at increasing times -> lease_until ascending in that order
        clock.set(t0 + timedelta(hours=4, seconds=i + 1))
        (j,) = await lease(store, limit=1)
        leased[j.id] = j
    assert await page(JobState.ACTIVE) == [
        j.id for j in sorted(leased.values(), key=lambda j: j.lease_until)
    ]
    for i, j in enumerate(sorted(leased.values(), key=lambda j: j.id)):
        clock.set(t0 + timedelta(hours=5, seconds=i))
        await store.ack(j.id, j.lease_token)
    assert await page(JobState.SUCCEEDED) == sorted(leased, reverse=False)[::-1]


async def test_list_jobs_paginates_with_total(store: PostgresStore) -> None:
    for _ in range(5):
        await store.enqueue(job("a"))
    await store.enqueue(job("b"))
    first, total = await store.list_jobs(Source.QUEUE, JobFilter(kind="a"), 0, 2)
    second, _ = await store.list_jobs(Source.QUEUE, JobFilter(kind="a"), 2, 2)
    assert total == 5
    assert len(first) == len(second) == 2
    assert not {j.id for j in first} & {j.id for j in second}
    beyond, total = await store.list_jobs(Source.QUEUE, JobFilter(kind="a"), 50, 2)
    assert (beyond, total) == ([], 5)
    assert (await store.list_jobs(Source.DAG, JobFilter(), 0, 10)) == ([], 0)


async def test_get_job_returns_job_or_not_found(store: PostgresStore) -> None:
    p = job(meta={"m": "1"})
    await store.enqueue(p)
    got = await store.get_job(Source.QUEUE, p.id)
    assert (got.id, got.state, got.meta) == (p.id, JobState.PENDING, {"m": "1"})
    assert got.payload == p.payload
    with pytest.raises(NotFoundError):
        await store.get_job(Source.EVENT, p.id)
    with pytest.raises(NotFoundError):
        await store.get_job(Source.QUEUE, uuid.uuid4())


async def test_job_attempts_lists_the_failure_history_oldest_first_per_source(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    j = await enqueue_and_lease(store)
    assert await store.job_attempts(Source.QUEUE, j.id) == []  # a lease is no failure
    await store.reschedule(j.id, j.lease_token, timedelta(0), "timeout")
    clock.set(t0 + timedelta(minutes=1))
    await store.promote_due(Source.QUEUE)
    (again,) = await lease(store)
    await store.dead(again.id, again.lease_token, "gave up")
    history = await store.job_attempts(Source.QUEUE, j.id)
    assert [(a.attempt, a.error, a.at) for a in history] == [
        (1, "timeout", t0),
        (2, "gave up", t0 + timedelta(minutes=1)),
    ]
    assert await store.job_attempts(Source.EVENT, j.id) == []  # another source's view
    assert await store.job_attempts(Source.QUEUE, uuid.uuid4()) == []


async def test_retry_job_resets_dead_to_pending_with_fresh_budget(
    store: PostgresStore, clock: MovableClock
) -> None:
    id = await _dead(store, snooze_budget=timedelta(minutes=1))
    await store.pool.execute(
        "UPDATE azync_jobs SET reap_count = 2, deadline_at = now() WHERE id = $1", id
    )
    await store.retry_job(Source.QUEUE, id)
    r = await row(store, id)
    assert (r["state"], r["attempt"], r["reap_count"], r["deadline_at"]) == ("pending", 0, 0, None)
    (j,) = await lease(store)
    assert j.attempt == 1
    with pytest.raises(NotFoundError):
        await store.retry_job(Source.QUEUE, id)  # active, not dead


async def test_retry_job_whose_key_is_held_by_a_live_job_conflicts(store: PostgresStore) -> None:
    id = await _dead(store, idempotency_key="K")
    await store.enqueue(job(idempotency_key="K"))
    with pytest.raises(ConflictError):
        await store.retry_job(Source.QUEUE, id)
    assert (await row(store, id))["state"] == "dead"


async def test_retry_all_dead_by_kind_and_all(store: PostgresStore) -> None:
    a1, a2, b1 = await _dead(store, "a"), await _dead(store, "a"), await _dead(store, "b")
    held = await _dead(store, "a", idempotency_key="K")
    await store.enqueue(job("a", idempotency_key="K"))  # a live job now holds K
    assert await store.retry_all_dead(Source.QUEUE, "a") == 2
    assert {(await row(store, i))["state"] for i in (a1, a2)} == {"pending"}
    assert (await row(store, held))["state"] == "dead"
    assert (await row(store, b1))["state"] == "dead"
    assert await store.retry_all_dead(Source.QUEUE, "") == 1


async def test_run_now_expedites_scheduled_only(store: PostgresStore) -> None:
    p = job(delay=timedelta(days=1))
    await store.enqueue(p)
    await store.run_now(Source.QUEUE, p.id)
    (j,) = await lease(store)
    assert j.id == p.id
    with pytest.raises(NotFoundError):
        await store.run_now(Source.QUEUE, p.id)  # active
    due = job()
    await store.enqueue(due)
    with pytest.raises(NotFoundError):
        await store.run_now(Source.QUEUE, due.id)  # already runnable


async def test_archive_job_kills_pending_or_scheduled_only(store: PostgresStore) -> None:
    pending, scheduled = job(), job(delay=timedelta(hours=1))
    for p in (pending, scheduled):
        await store.enqueue(p)
        await store.archive_job(Source.QUEUE, p.id)
        assert (await row(store, p.id))["state"] == "dead"
    active = await enqueue_and_lease(store)
    with pytest.raises(NotFoundError):
        await store.archive_job(Source.QUEUE, active.id)


async def test_pause_and_resume_job_by_run_at(store: PostgresStore) -> None:
    due, later = job(), job(delay=timedelta(hours=1))
    for p in (due, later):
        await store.enqueue(p)
        await store.pause_job(Source.QUEUE, p.id)
        assert (await row(store, p.id))["state"] == "paused"
    assert await lease(store) == []
    with pytest.raises(NotFoundError):
        await store.pause_job(Source.QUEUE, due.id)  # already paused
    await store.resume_job(Source.QUEUE, due.id)
    await store.resume_job(Source.QUEUE, later.id)
    assert (await row(store, due.id))["state"] == "pending"
    assert (await row(store, later.id))["state"] == "scheduled"
    with pytest.raises(NotFoundError):
        await store.resume_job(Source.QUEUE, due.id)  # not paused


async def test_delete_job_only_in_the_given_state(store: PostgresStore) -> None:
    p = job()
    await store.enqueue(p)
    with pytest.raises(NotFoundError):
        await store.delete_job(Source.QUEUE, p.id, JobState.DEAD)
    await store.delete_job(Source.QUEUE, p.id, JobState.PENDING)
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 0


async def test_delete_all_jobs_removes_one_kind_in_one_state_and_counts(
    store: PostgresStore,
) -> None:
    dead_a = await _dead(store, "a")
    for p in (job("a"), job("a"), job("b"), job("a", delay=timedelta(hours=1))):
        await store.enqueue(p)
    assert await store.delete_all_jobs(Source.QUEUE, "a", JobState.PENDING) == 2
    left = {(r["kind"], r["state"]) for r in await store.pool.fetch("SELECT * FROM azync_jobs")}
    assert left == {("b", "pending"), ("a", "scheduled"), ("a", "dead")}
    assert await store.delete_all_jobs(Source.QUEUE, "a", JobState.PENDING) == 0
    assert (await row(store, dead_a))["state"] == "dead"


async def test_delete_all_jobs_of_every_kind_with_an_empty_kind(store: PostgresStore) -> None:
    for kind in ("a", "b", "c"):
        await _dead(store, kind)
    await store.enqueue(job("a"))
    assert await store.delete_all_jobs(Source.QUEUE, "", JobState.DEAD) == 3
    assert [r["state"] for r in await store.pool.fetch("SELECT state FROM azync_jobs")] == [
        "pending"
    ]


async def test_delete_all_jobs_touches_only_the_given_source(store: PostgresStore) -> None:
    await store.enqueue(job("a"))
    assert await store.delete_all_jobs(Source.EVENT, "a", JobState.PENDING) == 0
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 1


@pytest.mark.parametrize("state", [JobState.ACTIVE, JobState.UNCERTAIN])
async def test_delete_all_jobs_refuses_in_flight_states(
    store: PostgresStore, state: JobState
) -> None:
    active = await enqueue_and_lease(store, "a")
    with pytest.raises(ValueError, match="in flight"):
        await store.delete_all_jobs(Source.QUEUE, "a", state)
    assert (await row(store, active.id))["state"] == "active"


async def test_delete_all_jobs_refuses_a_bad_kind(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="kind"):
        await store.delete_all_jobs(Source.QUEUE, "a\x00b", JobState.PENDING)


async def test_delete_all_jobs_leaves_workflow_and_dag_owned_jobs(store: PostgresStore) -> None:
    wid = await started(store)  # its workflow task waits, pending
    dag_id = await create(store, params([task("t")]))  # its task waits, pending
    assert await store.delete_all_jobs(Source.WORKFLOW, "", JobState.PENDING) == 0
    assert await store.delete_all_jobs(Source.DAG, "", JobState.PENDING) == 0
    owned = await store.pool.fetch("SELECT run_id, dag_id, state FROM azync_jobs")
    assert {(r["run_id"], r["dag_id"], r["state"]) for r in owned} == {
        (wid, None, "pending"),
        (None, dag_id, "pending"),
    }


async def test_vacuum_dead_removes_dead_enqueued_before_cutoff(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    old = await _dead(store, "a")
    clock.set(t0 + timedelta(days=2))
    young = await _dead(store, "a")
    other = await _dead(store, "b")
    clock.set(t0 + timedelta(days=3))
    assert await store.vacuum_dead(Source.QUEUE, "a", timedelta(days=2)) == 1
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE id = $1", old) == 0
    assert await store.vacuum_dead(Source.QUEUE, "", timedelta(hours=1)) == 2
    left = {r["id"] for r in await store.pool.fetch("SELECT id FROM azync_jobs")}
    assert left.isdisjoint({young, other})


async def test_vacuum_stats_trims_days_older_than_retention_folded_or_not(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    for days_ago in (40, 10, 0):
        clock.set(t0 - timedelta(days=days_ago))
        await store.enqueue(job())
    assert await store.fold_stats(100) == 3
    clock.set(t0 - timedelta(days=40))
    await store.enqueue(job())  # a delta of the old day, not folded
    clock.set(t0 - timedelta(days=35))  # a window that covers the old day
    assert [d.enqueued for d in await store.all_daily(Source.QUEUE) if d.enqueued] == [2]
    clock.set(t0)
    assert await store.vacuum_stats(Source.QUEUE, timedelta(0)) == 0
    assert await store.vacuum_stats(Source.QUEUE, timedelta(days=-1)) == 0
    # the old day's folded row and its delta
    assert await store.vacuum_stats(Source.QUEUE, timedelta(days=30)) == 2
    assert [d.enqueued for d in await store.all_daily(Source.QUEUE) if d.enqueued] == [1, 1]
    clock.set(t0 - timedelta(days=35))
    assert not [d for d in await store.all_daily(Source.QUEUE) if d.enqueued]


async def test_backlog_counts_due_pending_jobs_and_uncertain_operations_with_their_oldest_age(
    store: PostgresStore, clock: MovableClock
) -> None:
    start = clock.advance(timedelta(0))
    await store.enqueue(job("a"))
    clock.set(start + timedelta(minutes=1))
    await store.enqueue(job("a"))
    await store.enqueue(job("a", delay=timedelta(hours=1)))  # not due: not waiting
    await enqueue_and_lease(store, "b")  # running: not waiting
    await _dead(store, "c")  # settled: not waiting
    wid = await started(store)
    task = await lease_task(store, wid)
    assert task.lease_token is not None
    await commit_workflow_task(
        store,
        task.id,
        task.lease_token,
        wid,
        1,
        events=[("ActivityScheduled", b'{"seq":1}')],
        operations=[op_params(wid, 1, idempotent=False, activity="charge")],
    )
    [op] = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=1, lease=LEASE)
    )
    clock.set(start + timedelta(minutes=2))
    assert op.lease_token is not None
    await store.mark_uncertain(
        op.id, op.lease_token, "timeout", event_type="OperationUncertain", payload=b'{"seq":1}'
    )
    clock.set(start + timedelta(minutes=5))
    got = {(e.source, e.kind, e.state): (e.count, e.oldest_age) for e in await store.backlog()}
    assert got == {
        (Source.QUEUE, "a", JobState.PENDING): (2, timedelta(minutes=5)),
        (Source.WORKFLOW, "$op:charge@1", JobState.UNCERTAIN): (1, timedelta(minutes=3)),
    }
