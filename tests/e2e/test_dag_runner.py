"""DAGRunner mechanics: heartbeats keep long tasks leased, cancellation hands the
job back, large payloads round-trip byte for byte."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from azync_flow.dag import DAG, DAGClient, DAGRunner, DAGScheduler, TaskContext
from azync_flow.errors import NotReady, Skip
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, JobState, Source
from azync_flow.telemetry import AttemptOutcome
from azync_flow.testing import MovableClock
from tests.e2e.dag_util import FAST, settle, task_states


async def test_heartbeat_keeps_a_long_task_from_being_reaped(store: PostgresStore) -> None:
    d = DAG("long")
    runs: list[int] = []

    @d.task
    async def slow(ctx: TaskContext) -> None:
        runs.append(ctx.attempt)
        await asyncio.sleep(1.0)

    run = await DAGClient(store).run(d)
    r = DAGRunner(store, [d], retry=FAST, lease=timedelta(milliseconds=300))
    sched = DAGScheduler(store, max_reaps=1)
    batch = asyncio.create_task(r.run_batch())
    for _ in range(8):  # the reaper runs while the handler works
        await asyncio.sleep(0.12)
        stats = await sched.tick()
        assert stats.reaped == 0
    assert await batch == 1
    assert runs == [1]
    view = await settle(store, r, run.id)
    assert view.state == DAGState.SUCCEEDED


async def test_cancelled_handler_releases_its_job_without_spending_an_attempt(
    store: PostgresStore,
) -> None:
    d = DAG("cancelled")
    started = asyncio.Event()

    @d.task
    async def hang(ctx: TaskContext) -> None:
        started.set()
        await asyncio.sleep(3600)

    run = await DAGClient(store).run(d)
    r = DAGRunner(store, [d])
    (job,) = await store.dag_dequeue(r.kinds, 1, timedelta(seconds=30))
    task = asyncio.create_task(r.run_task(job))
    await started.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    (j,) = await store.dag_tasks(run.id)
    assert (j.state, j.attempt) == (JobState.PENDING, 0)


async def test_ten_mib_payload_result_and_signal_round_trip(store: PostgresStore) -> None:
    big = "x\u0000\U0001f600" * (10 * 1024 * 1024 // 9)
    d = DAG("big")

    @d.task
    async def echo(ctx: TaskContext) -> str:
        assert ctx.payload == big
        return ctx.payload

    d.signal("sig", after=[echo])
    client = DAGClient(store)
    run = await client.run(d, big)
    assert (await client.signal(run.id, "sig", big)).delivered == 0
    view = await settle(store, DAGRunner(store, [d]), run.id)
    assert view.state == DAGState.SUCCEEDED
    res = await client.results(run.id)
    assert res["echo"].value == big
    assert res["sig"].value == big
    assert len(res["echo"].raw or b"") > 10 * 1024 * 1024
    assert (await task_states(store, run.id)) == {
        "echo": JobState.SUCCEEDED,
        "sig": JobState.SUCCEEDED,
    }


async def test_settle_after_the_lease_was_reaped_and_retaken_is_stale(
    store: PostgresStore, clock: MovableClock
) -> None:
    d = DAG("stale")
    ran: list[int] = []

    @d.task
    async def a(ctx: TaskContext) -> None:
        ran.append(ctx.attempt)

    clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    run = await DAGClient(store).run(d)
    r = DAGRunner(store, [d])
    (first,) = await store.dag_dequeue(r.kinds, 1, timedelta(seconds=30))
    clock.advance(timedelta(seconds=31))
    assert [t.dead for t in await store.dag_reap_expired_tasks(5)] == [False]
    (second,) = await store.dag_dequeue(r.kinds, 1, timedelta(seconds=30))
    assert await r.run_task(first) is None  # its token no longer owns the row
    assert await r.run_task(second) is AttemptOutcome.SUCCEEDED
    (j,) = await store.dag_tasks(run.id)
    assert (j.state, j.reap_count, ran) == (JobState.SUCCEEDED, 1, [1, 2])


async def test_skip_and_deadlined_snooze_wake_the_scheduler(
    store: PostgresStore, pg_dsn: str, clock: MovableClock
) -> None:
    """The runner's extra over the shared skip/snooze verbs: a ``dag:$tick`` NOTIFY."""
    d = DAG("wakes")

    @d.task
    async def skipper(ctx: TaskContext) -> None:
        raise Skip("nothing to do")

    @d.task(deadline=timedelta(seconds=10))
    async def poller(ctx: TaskContext) -> None:
        raise NotReady(timedelta(seconds=1), "never ready")

    ticks: asyncio.Queue[str] = asyncio.Queue()
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.add_listener(
            store.channel, lambda _c, _p, _ch, payload: ticks.put_nowait(payload)
        )
        clock.set(datetime(2030, 1, 1, tzinfo=UTC))
        run = await DAGClient(store).run(d)
        r = DAGRunner(store, [d])

        async def run_kind(suffix: str) -> AttemptOutcome | None:
            (kind,) = [k for k in r.kinds if k.endswith(suffix)]
            p = DequeueParams(kind=kind, limit=1, lease=timedelta(seconds=30))
            (job,) = await store.dequeue_batch(Source.DAG, p)
            return await r.run_task(job)

        async def drain() -> None:  # drop wakes of earlier statements (e.g. the run's start)
            await asyncio.sleep(0.3)
            while not ticks.empty():
                ticks.get_nowait()

        async def next_tick() -> None:
            async with asyncio.timeout(5):
                while (await ticks.get()) != "dag:$tick":
                    pass

        await drain()
        assert await run_kind("skipper") is AttemptOutcome.SKIPPED
        await next_tick()
        assert await run_kind("poller") is AttemptOutcome.SNOOZED  # stamps the deadline
        clock.advance(timedelta(seconds=11))
        assert await store.promote_due(Source.DAG) == 1
        await drain()
        assert await run_kind("poller") is AttemptOutcome.DEAD  # snoozed past its deadline
        await next_tick()
        dead = [j for j in await store.dag_tasks(run.id) if j.task_key == "poller"]
        assert [j.state for j in dead] == [JobState.DEAD]
    finally:
        await conn.close()
