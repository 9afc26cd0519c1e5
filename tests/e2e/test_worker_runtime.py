"""Worker runtime mechanics on real Postgres: limits, heartbeats, wake-ups, leadership."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow.errors import LeaseLost
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.postgres._base import job_from_row
from azync_flow.store.queue import EnqueueParams, Job, JobState, Source
from azync_flow.worker import JobContext, LeaseHandle, Worker, WorkerStore

FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}
QUEUE_LEADERSHIP = "azync_flow.maintenance.queue"


async def enqueue(store: PostgresStore, kind: str, payload: Any = None) -> uuid.UUID:
    job_id = uuid.uuid4()
    raw = msgspec.json.encode(payload)
    assert await store.enqueue(EnqueueParams(id=job_id, kind=kind, payload=raw))
    return job_id


async def get(store: PostgresStore, job_id: uuid.UUID) -> Job:
    row = await store.pool.fetchrow("SELECT * FROM azync_jobs WHERE id = $1", job_id)
    assert row is not None
    return job_from_row(row)


@pytest.fixture
async def poll_only_store(pg_dsn: str, store: PostgresStore) -> AsyncIterator[PostgresStore]:
    s = await open_store(pg_dsn, Config(schema=store.schema, poll_only=True), migrate=False)
    yield s
    await s.close()


async def test_per_kind_concurrency_limit_is_never_exceeded(store: PostgresStore) -> None:
    running = 0
    peak = 0
    barrier = asyncio.Barrier(3)
    other_ran = asyncio.Event()
    worker = Worker(store, concurrency=50, **FAST)

    @worker.register("limited", concurrency=3)
    async def limited(payload: Any) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        # Three must be able to meet here (the limit is not lower than 3) ...
        await barrier.wait()
        await asyncio.sleep(0.01)
        running -= 1

    @worker.register("other")
    async def other(payload: Any) -> None:
        other_ran.set()

    ids = [await enqueue(store, "limited", i) for i in range(12)]
    await enqueue(store, "other")
    await worker.run_until_idle()

    # ... and a fourth never joined them.
    assert peak == 3
    assert other_ran.is_set()
    for job_id in ids:
        assert (await get(store, job_id)).state == JobState.SUCCEEDED
    loop = worker.loops[(Source.QUEUE, "limited")]
    assert loop.stats.leased == 12


async def test_heartbeat_keeps_a_long_handler_lease_while_the_reaper_runs(
    store: PostgresStore,
) -> None:
    runs: list[int] = []
    lease_seen: list[Any] = []
    # A lease long enough that a heartbeat delayed by a loaded machine still
    # lands in time; the handler outlives three of them.
    worker = Worker(store, lease=timedelta(milliseconds=1500), **FAST)

    @worker.register("long")
    async def long(payload: Any, ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        for _ in range(4):  # 5 s in all: more than three leases
            await asyncio.sleep(1.25)
            lease_seen.append(
                await store.pool.fetchval(
                    "SELECT lease_until > now() FROM azync_jobs WHERE id = $1", ctx.id
                )
            )

    job_id = await enqueue(store, "long")
    await worker.run_until_idle()

    assert runs == [1]
    assert lease_seen == [True, True, True, True]
    job = await get(store, job_id)
    assert job.state == JobState.SUCCEEDED
    assert job.reap_count == 0
    assert worker.loops[(Source.QUEUE, "long")].stats.heartbeats >= 4


async def test_lost_lease_cancels_the_stale_attempt_and_only_the_new_one_settles(
    store: PostgresStore,
) -> None:
    """once the lease is reaped and re-leased, the old attempt is fenced off."""
    first_started = asyncio.Event()
    first_cancelled = asyncio.Event()
    second_done = asyncio.Event()
    worker = Worker(store, lease=timedelta(milliseconds=600), concurrency=2, **FAST)

    @worker.register("fenced")
    async def fenced(payload: Any, ctx: JobContext) -> None:
        if ctx.job.reap_count == 0:
            first_started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                first_cancelled.set()
                raise
        else:
            second_done.set()

    job_id = await enqueue(store, "fenced")
    async with worker:
        await asyncio.wait_for(first_started.wait(), 10)
        # Expire the lease behind the worker's back (as if it had stalled) and
        # change its token, so no heartbeat of the first attempt can renew it
        # before the reaper takes it.
        await store.pool.execute(
            "UPDATE azync_jobs SET lease_until = now() - interval '1 second',"
            " lease_token = gen_random_uuid() WHERE id = $1",
            job_id,
        )
        await asyncio.wait_for(second_done.wait(), 10)
        await asyncio.wait_for(first_cancelled.wait(), 10)

    job = await get(store, job_id)
    assert job.state == JobState.SUCCEEDED
    assert job.reap_count == 1
    assert worker.loops[(Source.QUEUE, "fenced")].stats.lost == 1


async def test_manual_heartbeat_on_a_stale_token_raises_lease_lost(store: PostgresStore) -> None:
    worker = Worker(store, **FAST)
    outcome: list[str] = []

    @worker.register("manual")
    async def manual(payload: Any, ctx: JobContext) -> None:
        await ctx.heartbeat(timedelta(seconds=5))
        await store.pool.execute(
            "UPDATE azync_jobs SET lease_token = gen_random_uuid() WHERE id = $1", ctx.id
        )
        try:
            await ctx.heartbeat()
        except LeaseLost:
            outcome.append("lost")
            assert ctx.lease_lost

    job_id = await enqueue(store, "manual")
    async with worker:
        for _ in range(200):
            if outcome:
                break
            await asyncio.sleep(0.01)
    assert outcome == ["lost"]
    # The stale attempt did not settle: the row still belongs to the other token.
    assert (await get(store, job_id)).state == JobState.ACTIVE


async def test_push_wakeup_runs_job_promptly_with_a_long_poll_interval(
    store: PostgresStore,
) -> None:
    ran = asyncio.Event()
    worker = Worker(
        store,
        poll_interval=timedelta(seconds=60),
        maintenance_interval=timedelta(seconds=60),
        handle_signals=False,
    )

    @worker.register("ping")
    async def ping(payload: Any) -> None:
        ran.set()

    async with worker:
        assert worker.wakeups.live
        loop = worker.loops[(Source.QUEUE, "ping")]
        for _ in range(1000):  # until the first (empty) lease round is done
            if loop.stats.dequeues:
                break
            await asyncio.sleep(0.005)
        started = time.monotonic()
        await enqueue(store, "ping")
        await asyncio.wait_for(ran.wait(), 10)
        latency = time.monotonic() - started
    assert latency < 1.0, latency
    assert loop.stats.dequeues <= 3


async def test_poll_only_store_still_runs_jobs_by_polling(
    poll_only_store: PostgresStore,
) -> None:
    ran = asyncio.Event()
    worker = Worker(poll_only_store, **{**FAST, "poll_interval": timedelta(milliseconds=100)})

    @worker.register("ping")
    async def ping(payload: Any) -> None:
        ran.set()

    async with worker:
        assert not worker.wakeups.live
        await enqueue(poll_only_store, "ping")
        await asyncio.wait_for(ran.wait(), 10)


async def test_idle_worker_polls_once_per_interval_and_never_spins(
    store: PostgresStore,
) -> None:
    worker = Worker(store, **{**FAST, "poll_interval": timedelta(milliseconds=100)})

    @worker.register("a")
    async def a(payload: Any) -> None:
        return None

    async with worker:
        began = time.monotonic()
        await asyncio.sleep(1.0)
        idle_s = time.monotonic() - began  # a loaded machine stretches the second
    dequeues = worker.loops[(Source.QUEUE, "a")].stats.dequeues
    # about one poll per 100 ms of the window: a late wake-up may skip some,
    # a spinning loop would make hundreds
    assert 3 <= dequeues <= idle_s / 0.1 + 3


async def test_only_one_worker_leads_maintenance_and_leadership_fails_over(
    store: PostgresStore,
) -> None:
    ticks: dict[str, int] = {"w1": 0, "w2": 0}

    def make(name: str) -> Worker:
        w = Worker(store, **FAST)

        async def noop(payload: Any) -> None:
            return None

        async def count() -> None:
            ticks[name] += 1

        w.register("k", noop)
        w.add_maintenance(count, name="count", leadership="test.runtime")
        return w

    w1, w2 = make("w1"), make("w2")
    async with w1:
        for _ in range(200):  # w1 takes the leadership first, however slow the machine
            if w1.maintenance.is_leader("test.runtime"):
                break
            await asyncio.sleep(0.05)
        async with w2:
            await asyncio.sleep(0.3)
            assert w1.maintenance.is_leader("test.runtime")
            assert not w2.maintenance.is_leader("test.runtime")
            assert w1.maintenance.is_leader(QUEUE_LEADERSHIP)
            before = ticks["w2"]
            assert before == 0
            await w1.__aexit__(None, None, None)  # leader shuts down
            for _ in range(100):
                if w2.maintenance.is_leader("test.runtime") and ticks["w2"] > 0:
                    break
                await asyncio.sleep(0.02)
            assert w2.maintenance.is_leader("test.runtime")
            assert ticks["w2"] > 0
    assert ticks["w1"] > 0


async def test_add_loop_runs_a_custom_runner_with_heartbeat_and_batched_ack(
    store: PostgresStore,
) -> None:
    """The extension point other runtimes use: a runner settles its own jobs."""
    seen: list[tuple[uuid.UUID, int]] = []
    worker = Worker(store, **FAST)

    async def runner(job: Job, lease: LeaseHandle) -> None:
        await lease.extend(timedelta(seconds=10))
        seen.append((job.id, job.attempt))
        await worker.acks.ack(job.id, lease.token)

    worker.add_loop(Source.QUEUE, "custom", runner, concurrency=4)
    ids = {await enqueue(store, "custom", i) for i in range(10)}
    await worker.run_until_idle()

    assert {i for i, _ in seen} == ids
    assert all(attempt == 1 for _, attempt in seen)
    for job_id in ids:
        assert (await get(store, job_id)).state == JobState.SUCCEEDED
    with pytest.raises(ValueError, match="already registered"):
        worker.add_loop(Source.QUEUE, "custom", runner)


async def test_a_heartbeat_only_lease_lapses_when_its_runner_falls_silent(
    store: PostgresStore,
) -> None:
    """The generic knob: background renewal skips the job, so a silent runner
    loses it (cancelled, reaped, run again) while the worker lives on."""
    attempts: list[int] = []
    cancelled = asyncio.Event()
    stale: list[BaseException] = []
    worker = Worker(store, lease=timedelta(seconds=30), **FAST)

    async def runner(job: Job, lease: LeaseHandle) -> None:
        attempts.append(job.attempt)
        await lease.renew_only_by_heartbeats(timedelta(milliseconds=500))
        if len(attempts) == 1:
            try:
                await asyncio.sleep(30)  # silent: no extend() call
            except asyncio.CancelledError:
                cancelled.set()
                try:
                    await lease.extend()
                except LeaseLost as exc:
                    stale.append(exc)
                raise
        for _ in range(4):  # 1.2 s of work, renewing its own lease in time
            await asyncio.sleep(0.3)
            await lease.extend()
        await worker.acks.ack(job.id, lease.token)

    loop = worker.add_loop(Source.QUEUE, "silent", runner)
    job_id = await enqueue(store, "silent")
    started = time.monotonic()
    await asyncio.wait_for(worker.run_until_idle(), 20)

    assert cancelled.is_set()
    assert time.monotonic() - started < 10  # not the 30 s worker lease
    assert len(stale) == 1  # a lapsed lease is never renewed again
    assert len(attempts) == 2
    assert loop.stats.lost == 1
    job = await get(store, job_id)
    assert (job.state, job.reap_count) == (JobState.SUCCEEDED, 1)


async def test_maintenance_step_that_makes_work_runnable_wakes_the_loops(
    store: PostgresStore,
) -> None:
    ran = asyncio.Event()
    parked: list[uuid.UUID] = []
    worker = Worker(
        store,
        poll_interval=timedelta(seconds=60),
        maintenance_interval=timedelta(milliseconds=50),
        handle_signals=False,
    )

    @worker.register("parked")
    async def handle(payload: Any) -> None:
        ran.set()

    async def unpark() -> int:
        n = 0
        while parked:
            await store.pool.execute(
                "UPDATE azync_jobs SET state = 'pending' WHERE id = $1", parked.pop()
            )
            n += 1
        return n

    worker.add_maintenance(unpark, name="unpark", leadership="test.unpark", source=Source.QUEUE)
    job_id = await enqueue(store, "parked")
    await store.pool.execute("UPDATE azync_jobs SET state = 'paused' WHERE id = $1", job_id)
    async with worker:
        await asyncio.sleep(0.1)
        parked.append(job_id)
        await asyncio.wait_for(ran.wait(), 5)


async def test_shutdown_grace_lets_in_flight_job_finish_with_its_lease_still_renewed(
    store: PostgresStore,
) -> None:
    started = asyncio.Event()
    lease_held: list[bool] = []
    worker = Worker(
        store,
        lease=timedelta(milliseconds=450),
        shutdown_grace=timedelta(seconds=5),
        **FAST,
    )

    @worker.register("finishing")
    async def finishing(payload: Any, ctx: JobContext) -> None:
        started.set()
        for _ in range(3):  # 1.2 s after shutdown began: well past the lease
            await asyncio.sleep(0.4)
            lease_held.append(
                await store.pool.fetchval(
                    "SELECT lease_until > now() FROM azync_jobs WHERE id = $1", ctx.id
                )
            )

    job_id = await enqueue(store, "finishing")
    async with worker:
        await asyncio.wait_for(started.wait(), 10)
        worker.shutdown()  # __aexit__ then waits for the drain
        late = await enqueue(store, "finishing")

    assert lease_held == [True, True, True]
    assert (await get(store, job_id)).state == JobState.SUCCEEDED
    # Nothing is leased once shutdown began.
    assert (await get(store, late)).state == JobState.PENDING


async def test_postgres_store_provides_every_verb_the_worker_uses(store: PostgresStore) -> None:
    assert isinstance(store, WorkerStore)


async def test_leader_ttl_shorter_than_two_maintenance_ticks_is_refused(
    store: PostgresStore,
) -> None:
    with pytest.raises(ValueError, match="at least twice the maintenance tick"):
        Worker(store, maintenance_interval=timedelta(seconds=1), leader_ttl=timedelta(seconds=1.5))
    w = Worker(store, maintenance_interval=timedelta(seconds=30))
    assert w.maintenance.leader_ttl == timedelta(seconds=90)  # default: max(10 s, 3 ticks)


async def test_leader_keeps_its_lease_through_a_tick_longer_than_the_ttl(
    store: PostgresStore,
) -> None:
    """The lease is renewed between steps, so slow steps do not lose it."""
    runs: list[str] = []
    w = Worker(
        store,
        maintenance_interval=timedelta(milliseconds=200),
        leader_ttl=timedelta(seconds=1),
        handle_signals=False,
    )
    for i in range(4):

        async def slow(name: str = f"slow{i}") -> None:
            await asyncio.sleep(0.4)
            await store.promote_due(Source.QUEUE)  # a fenced statement after the sleep
            runs.append(name)

        w.add_maintenance(slow, name=f"slow{i}", leadership="test.slow")
    async with w:
        for _ in range(400):
            if len(runs) >= 8:
                break
            await asyncio.sleep(0.02)
        assert w.maintenance.is_leader("test.slow")
    assert runs[:8] == [f"slow{i}" for i in range(4)] * 2  # two ticks of 1.6 s, no loss


async def test_a_renewal_racing_the_ack_is_not_counted_as_a_lost_lease(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The heartbeat took the handle before the runner returned; its renewal
    reaches the database after the ack committed and finds no leased row."""
    worker = Worker(store, **FAST)
    handles: list[LeaseHandle] = []

    @worker.register("quick")
    async def quick(payload: Any, ctx: JobContext) -> None:
        handles.append(ctx._lease)

    job_id = await enqueue(store, "quick")
    await worker.run_until_idle()
    assert (await get(store, job_id)).state == JobState.SUCCEEDED
    loop = worker.loops[(Source.QUEUE, "quick")]
    with caplog.at_level("WARNING", logger="azync_flow"):
        await loop._beat(handles[0])
    assert loop.stats.lost == 0
    assert "lost" not in caplog.text
