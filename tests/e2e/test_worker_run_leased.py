"""A job leased elsewhere handed to a running worker's loop (``reserve`` +
``run_leased``): it runs at once, holds a slot, has its lease renewed like a
dequeued job, and reserved slots are never filled by the loop's own dequeues."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, EnqueueParams, Job, JobState, Source
from azync_flow.worker import JobContext, Worker


async def enqueue(store: PostgresStore, kind: str, payload: object) -> uuid.UUID:
    job_id = uuid.uuid4()
    assert await store.enqueue(
        EnqueueParams(id=job_id, kind=kind, payload=msgspec.json.encode(payload))
    )
    return job_id


async def lease_one(store: PostgresStore, kind: str, lease: timedelta) -> Job:
    [job] = await store.dequeue_batch(Source.QUEUE, DequeueParams(kind=kind, limit=1, lease=lease))
    return job


async def test_a_job_leased_elsewhere_runs_at_once_with_its_lease_renewed(
    store: PostgresStore,
) -> None:
    lease = timedelta(milliseconds=600)
    worker = Worker(
        store,
        concurrency=1,
        lease=lease,
        poll_interval=timedelta(seconds=30),  # no dequeue would find it in time
        handle_signals=False,
        maintain=(),
    )
    ran: list[int] = []

    @worker.register("slow")
    async def slow(payload: int, ctx: JobContext) -> None:
        await asyncio.sleep(1.5)  # longer than the lease: only renewals keep it
        ran.append(payload)

    async with worker:
        loop = worker.loops[(Source.QUEUE, "slow")]
        assert loop.reserve(2) == 1  # concurrency 1: one free slot, now promised
        assert loop.free_slots() == 0  # so the loop's own dequeues leave the job alone
        job_id = await enqueue(store, "slow", 7)
        job = await lease_one(store, "slow", lease)
        loop.run_leased(job)
        assert loop.reserved == 0
        assert len(loop.in_flight) == 1
        for _ in range(100):
            if ran:
                break
            await asyncio.sleep(0.05)
        await worker.acks.flush()
    assert ran == [7]
    assert loop.stats.local == 1
    assert loop.stats.heartbeats >= 1
    row = await store.pool.fetchrow(
        "SELECT state, attempt, reap_count FROM azync_jobs WHERE id = $1", job_id
    )
    assert (row["state"], row["attempt"], row["reap_count"]) == (JobState.SUCCEEDED, 1, 0)


async def test_reserved_slots_are_not_filled_by_the_loop(store: PostgresStore) -> None:
    worker = Worker(
        store,
        concurrency=1,
        poll_interval=timedelta(milliseconds=20),
        handle_signals=False,
        maintain=(),
    )

    @worker.register("k")
    async def handler(payload: int, ctx: JobContext) -> None:
        return None

    async with worker:
        loop = worker.loops[(Source.QUEUE, "k")]
        assert loop.reserve(1) == 1
        job_id = await enqueue(store, "k", 1)
        await asyncio.sleep(0.3)  # many poll rounds
        row = await store.pool.fetchrow("SELECT state FROM azync_jobs WHERE id = $1", job_id)
        assert row["state"] == JobState.PENDING  # the reserved slot was not used
        loop.unreserve(1)
        for _ in range(100):
            row = await store.pool.fetchrow("SELECT state FROM azync_jobs WHERE id = $1", job_id)
            if row["state"] == JobState.SUCCEEDED:
                break
            await asyncio.sleep(0.05)
        assert row["state"] == JobState.SUCCEEDED


async def test_a_job_without_a_lease_token_is_refused(store: PostgresStore) -> None:
    worker = Worker(store, handle_signals=False, maintain=())

    @worker.register("k")
    async def handler(payload: int, ctx: JobContext) -> None:
        return None

    loop = worker.loops[(Source.QUEUE, "k")]
    assert loop.reserve(1) == 0  # not running: nothing can be handed over
    job = Job(id=uuid.uuid4(), source=Source.QUEUE, kind="k", state=JobState.PENDING)
    with pytest.raises(ValueError, match="not leased"):
        loop.run_leased(job)
