"""Task-queue limits in the queue store (real PostgreSQL): a concurrency limit
on a task queue admits at most its capacity of jobs routed there, whatever
their kind, across racing leases; a slot frees when its lease ends (reaped
included); queues without a limit keep their plain lease."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import Job, LimitSpec, Source, Wake
from azync_flow.testing import MovableClock, drop_schema, unique_schema

from ..helpers import LEASE, job, lease
from ..plans import DEQUEUE_ARGS, generic_plan, scans
from .test_limits import conc

GPU = ("gpu",)


async def on_gpu(store: PostgresStore, kind: str, limit: int = 10) -> list[Job]:
    return await lease(store, kind, limit=limit, task_queues=GPU)


async def test_racing_leases_of_several_kinds_share_the_task_queues_capacity_exactly(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 3))
    kinds = ("a", "b", "c", "d")
    for kind in kinds:
        assert all(await store.enqueue_many([job(kind, task_queue="gpu") for _ in range(10)]))
    rounds = await asyncio.gather(*(on_gpu(store, kinds[i % 4], limit=2) for i in range(12)))
    held = [j for r in rounds for j in r]
    assert len(held) == 3
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE state = 'active'") == 3
    assert [j for k in kinds for j in await on_gpu(store, k)] == []  # still full
    await store.ack(held[0].id, held[0].lease_token)  # type: ignore[arg-type]
    again = [j for k in kinds for j in await on_gpu(store, k)]
    assert len(again) == 1


async def test_an_expired_lease_on_a_limited_task_queue_frees_its_slot_once_reaped(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 1))
    assert await store.enqueue(job("a", task_queue="gpu"))
    assert await store.enqueue(job("b", task_queue="gpu"))
    (held,) = await on_gpu(store, "a")
    clock.advance(LEASE + timedelta(seconds=1))
    assert await on_gpu(store, "b") == []  # expired but not reaped: still held
    await store.reap_expired(Source.QUEUE, ["a"])
    (other,) = await on_gpu(store, "b")
    assert other.kind == "b"
    assert held.kind == "a"


async def test_a_queue_without_a_limit_is_unaffected_by_another_queues_limit(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 1))
    assert all(await store.enqueue_many([job("k") for _ in range(5)]))
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(5)]))
    plain = await lease(store, "k", limit=10)
    assert len(plain) == 5
    assert all(j.task_queue == "default" and j.limit_key is None for j in plain)
    # a worker serving both queues: the plain ones all, the limited one once
    assert all(await store.enqueue_many([job("k") for _ in range(3)]))
    both = await lease(store, "k", limit=10, task_queues=("default", "gpu"))
    assert sorted(j.task_queue for j in both) == ["default"] * 3 + ["gpu"]
    assert await lease(store, "k", limit=10, task_queues=("default", "gpu")) == []


async def test_the_lease_batch_never_exceeds_its_size_across_plain_and_limited_queues(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 5))
    assert all(await store.enqueue_many([job("k") for _ in range(3)]))
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(5)]))
    got = await lease(store, "k", limit=4, task_queues=("default", "gpu"))
    assert [j.task_queue for j in got] == ["gpu"] * 4  # the limited queue first
    assert len(await lease(store, "k", limit=4, task_queues=("default", "gpu"))) == 4


async def test_a_deep_plain_backlog_does_not_starve_a_limited_queue(store: PostgresStore) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 2))
    assert all(await store.enqueue_many([job("k") for _ in range(20)]))
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(5)]))
    got = await lease(store, "k", limit=5, task_queues=("default", "gpu"))
    assert sorted(j.task_queue for j in got) == ["default"] * 3 + ["gpu"] * 2


async def test_a_kinds_limit_and_its_task_queues_limit_both_admit(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("k-one", 1)])
    await store.declare_task_queue_limit("gpu", conc("gpu", 3))
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(4)]))
    assert all(await store.enqueue_many([job("j", task_queue="gpu") for _ in range(4)]))
    assert len(await on_gpu(store, "k")) == 1  # the kind's own limit
    assert len(await on_gpu(store, "j")) == 2  # what the task queue has left


async def test_a_limit_named_by_a_kind_and_its_task_queue_takes_one_slot(
    store: PostgresStore,
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("shared", 2)])
    await store.declare_task_queue_limit("gpu", conc("shared", 2))
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(4)]))
    assert len(await on_gpu(store, "k")) == 2


async def test_a_task_queue_limit_keys_the_jobs_already_waiting_and_none_removes_it(
    store: PostgresStore,
) -> None:
    assert all(await store.enqueue_many([job("k", task_queue="gpu") for _ in range(3)]))
    await store.declare_task_queue_limit("gpu", conc("gpu", 1))
    assert len(await on_gpu(store, "k")) == 1  # the older jobs are limited too
    await store.declare_task_queue_limit("gpu", conc("gpu", 2))
    assert len(await on_gpu(store, "k")) == 1  # capacity raised to 2
    await store.declare_task_queue_limit("gpu", None)
    assert len(await on_gpu(store, "k")) == 1  # unlimited again: the last one
    (usage,) = await store.list_limits()
    assert usage.task_queues == []


async def test_list_limits_shows_the_task_queue_with_in_flight_and_waiting(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu-slots", 2))
    assert all(await store.enqueue_many([job("a", task_queue="gpu") for _ in range(3)]))
    assert all(await store.enqueue_many([job("b", task_queue="gpu") for _ in range(2)]))
    assert all(await store.enqueue_many([job("a") for _ in range(4)]))  # not counted
    await on_gpu(store, "a")
    (usage,) = await store.list_limits()
    assert usage.spec == conc("gpu-slots", 2)
    assert (usage.kinds, usage.task_queues) == ([], ["gpu"])
    assert (usage.in_flight, usage.waiting) == (2, 3)


async def test_a_job_waiting_for_its_task_queue_names_the_full_limit(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 1))
    first, second = job("a", task_queue="gpu"), job("b", task_queue="gpu")
    assert all(await store.enqueue_many([first, second]))
    assert len(await on_gpu(store, "a")) == 1
    view = await store.get_job(Source.QUEUE, second.id)
    assert view.blocked_reason == "waits for concurrency limit 'gpu' of task queue 'gpu'"


@pytest.mark.parametrize(
    ("queue", "bad"),
    [
        ("gpu", LimitSpec(name="x", type="rate", capacity=1, period=timedelta(seconds=1))),
        ("gpu", LimitSpec(name="x", type="concurrency", capacity=1, per_key=True)),
        ("gpu", LimitSpec(name="x", type="concurrency", capacity=0)),
        ("q" * 300, LimitSpec(name="x", type="concurrency", capacity=1)),
    ],
)
async def test_a_bad_task_queue_limit_is_refused_before_anything_is_written(
    store: PostgresStore, queue: str, bad: LimitSpec
) -> None:
    with pytest.raises(ValueError):
        await store.declare_task_queue_limit(queue, bad)
    assert await store.list_limits() == []


async def test_the_lease_on_an_unlimited_queue_stays_an_index_scan_beside_a_limited_one(
    store: PostgresStore,
) -> None:
    await store.declare_task_queue_limit("gpu", conc("gpu", 1))
    async with store.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,
                                       payload)
               SELECT gen_random_uuid(), 'queue', 'k', 'pending',
                      now() - (g % 1000) * interval '1 second', now(), now(), '1'
               FROM generate_series(1, 100000) g"""
        )
        await conn.execute("ANALYZE azync_jobs")
        plan = await generic_plan(conn, "azync_job_lease", DEQUEUE_ARGS)
    found = scans(plan)
    assert ("Index Scan", "azync_jobs_ready") in found
    assert all(t != "Seq Scan" and not t.startswith("Bitmap") for t, _ in found), found
    assert "One-Time Filter" in json.dumps(plan)
    assert len(await lease(store, "k", limit=10)) == 10


async def test_a_job_freeing_a_full_task_queue_wakes_the_workers_of_the_kind_waiting_there(
    pg_dsn: str, clock: MovableClock
) -> None:
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, notify_channel=f"w_{schema}"), clock=clock)
    try:
        await s.declare_task_queue_limit("gpu", conc("gpu", 1))
        assert await s.enqueue(job("a", task_queue="gpu"))
        assert await s.enqueue(job("b", task_queue="gpu"))
        (held,) = await on_gpu(s, "a")
        sub = await s.wake()
        assert sub is not None
        async with sub:
            await s.ack(held.id, held.lease_token)  # type: ignore[arg-type]
            async with asyncio.timeout(5):
                woken = await anext(sub)
        assert woken == Wake(source=Source.QUEUE, kind="b")
        assert len(await on_gpu(s, "b")) == 1
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)
