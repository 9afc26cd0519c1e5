"""Contract clauses of promote_due, reap_expired, the vacuums of spent keys and
completed jobs, and the backend clock."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock
from tests.store.helpers import enqueue_and_lease, job, lease, row, stat_sums


async def test_job_scheduled_30_days_out_due_when_clock_moves(
    store: PostgresStore, clock: MovableClock
) -> None:
    p = job(delay=timedelta(days=30))
    started = time.monotonic()
    await store.enqueue(p)
    assert await store.promote_due(Source.QUEUE) == 0
    assert await lease(store) == []
    clock.advance(timedelta(days=30, seconds=1))
    assert await store.promote_due(Source.QUEUE) == 1
    (leased,) = await lease(store)
    assert leased.id == p.id
    assert time.monotonic() - started < 2.0


async def test_promote_due_moves_only_due_scheduled_jobs_of_the_kinds(
    store: PostgresStore, clock: MovableClock
) -> None:
    a, b, later = (
        job("a", delay=timedelta(minutes=1)),
        job("b", delay=timedelta(minutes=1)),
        job("a", delay=timedelta(hours=1)),
    )
    for p in (a, b, later):
        await store.enqueue(p)
    clock.advance(timedelta(minutes=2))
    assert await store.promote_due(Source.QUEUE, ["a"]) == 1
    assert (await row(store, a.id))["state"] == "pending"
    assert (await row(store, b.id))["state"] == "scheduled"
    assert (await row(store, later.id))["state"] == "scheduled"
    assert await store.promote_due(Source.DAG) == 0  # other sources untouched
    assert await store.promote_due(Source.QUEUE) == 1  # None: every kind
    assert (await row(store, b.id))["state"] == "pending"


async def test_reap_returns_expired_lease_to_pending(
    store: PostgresStore, clock: MovableClock
) -> None:
    j = await enqueue_and_lease(store)
    assert await store.reap_expired(Source.QUEUE, ["k"], 3) == (0, 0)  # lease still live
    clock.advance(timedelta(seconds=31))
    assert await store.reap_expired(Source.QUEUE, ["other"], 3) == (0, 0)  # kind filter
    assert await store.reap_expired(Source.QUEUE, ["k"], 3) == (1, 0)
    r = await row(store, j.id)
    assert (r["state"], r["reap_count"], r["attempt"], r["lease_until"]) == (
        "pending",
        1,
        0,
        None,
    )
    assert await store.job_attempts(Source.QUEUE, j.id) == []
    assert (await stat_sums(store, "k"))["reaped"] == 1


async def test_reap_kills_after_max_reaps(store: PostgresStore, clock: MovableClock) -> None:
    await store.enqueue(job())
    kept = await enqueue_and_lease(store, "other")  # a second partition reaped alongside
    for n in (1, 2, 3):
        (j,) = await lease(store)
        clock.advance(timedelta(seconds=31))
        await store.extend_lease(kept.id, kept.lease_token, timedelta(days=1))
        reaped, killed = await store.reap_expired(Source.QUEUE, None, 3)
        assert (reaped, killed) == (1, 1 if n == 3 else 0)
    r = await row(store, j.id)
    assert (r["state"], r["reap_count"]) == ("dead", 3)
    assert "lease expired 3 times" in r["last_error"]
    assert [a.attempt for a in await store.job_attempts(Source.QUEUE, j.id)] == [1]
    sums = await stat_sums(store, "k")
    assert (sums["reaped"], sums["failed"]) == (3, 1)


async def test_reap_with_nonpositive_max_reaps_never_kills(
    store: PostgresStore, clock: MovableClock
) -> None:
    j = await enqueue_and_lease(store)
    for _ in range(4):
        clock.advance(timedelta(seconds=31))
        assert await store.reap_expired(Source.QUEUE, None, 0) == (1, 0)
        (j,) = await lease(store)
    assert (await row(store, j.id))["reap_count"] == 4


async def test_promote_due_leaves_dag_sleep_tasks_to_the_dag_scheduler(
    store: PostgresStore, clock: MovableClock
) -> None:
    dag_id = uuid.uuid4()
    await store.pool.execute(
        "INSERT INTO azync_dags (id, name, state, created_at, updated_at)"
        " VALUES ($1, 'd', 'running', now(), now())",
        dag_id,
    )
    for key, kind in (("nap", "$sleep"), ("work", "handler")):
        await store.pool.execute(
            "INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,"
            " dag_id, task_key) VALUES (gen_random_uuid(), 'dag', $1, 'scheduled', now(), now(),"
            " now(), $2, $3)",
            kind,
            dag_id,
            key,
        )
    clock.advance(timedelta(minutes=1))
    assert await store.promote_due(Source.DAG) == 1
    states = dict(await store.pool.fetch("SELECT task_key, state FROM azync_jobs"))
    assert states == {"nap": "scheduled", "work": "pending"}


async def test_vacuum_idempotency_trims_expired_keys(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.enqueue(job(idempotency_key="short", idempotency_ttl=timedelta(minutes=1)))
    await store.enqueue(job(idempotency_key="long", idempotency_ttl=timedelta(days=1)))
    assert await store.vacuum_idempotency(Source.QUEUE) == 0
    clock.advance(timedelta(minutes=2))
    assert await store.vacuum_idempotency(Source.QUEUE) == 1
    keys = await store.pool.fetch("SELECT key FROM azync_idempotency_keys")
    assert [r["key"] for r in keys] == ["long"]


async def test_vacuum_completed_exempts_dag_and_workflow_jobs(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = clock.advance(timedelta(0))
    done = await enqueue_and_lease(store)
    await store.ack(done.id, done.lease_token)
    skipped = await enqueue_and_lease(store)
    await store.skip(skipped.id, skipped.lease_token, "x")
    recent = await enqueue_and_lease(store)
    clock.set(t0 + timedelta(days=2))
    await store.ack(recent.id, recent.lease_token)
    dag_id, run_id = uuid.uuid4(), uuid.uuid4()
    await store.pool.execute(
        "INSERT INTO azync_dags (id, name, state, created_at, updated_at)"
        " VALUES ($1, 'd', 'running', now(), now())",
        dag_id,
    )
    await store.pool.execute(
        "INSERT INTO azync_workflow_executions (id, name, state, input, created_at, updated_at)"
        " VALUES ($1, 'w', 'running', 'null', now(), now())",
        run_id,
    )
    for source, owner in (("queue", "dag_id"), ("queue", "run_id"), ("dag", "dag_id")):
        await store.pool.execute(
            f"INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,"
            f" completed_at, task_key, {owner}) VALUES (gen_random_uuid(), $1, 'k', 'succeeded',"
            " $2, $2, $2, $2, $1 || 't', $3)",
            source,
            t0 - timedelta(days=30),
            dag_id if owner == "dag_id" else run_id,
        )
    clock.set(t0 + timedelta(days=3))
    assert await store.vacuum_completed(Source.QUEUE, timedelta(0)) == 0
    assert await store.vacuum_completed(Source.QUEUE, timedelta(days=2)) == 2
    left = await store.pool.fetch("SELECT id, dag_id, run_id FROM azync_jobs")
    assert len(left) == 4
    assert recent.id in {r["id"] for r in left}
    assert await store.vacuum_completed(Source.DAG, timedelta(days=1)) == 0
