"""The scheduler loop: leader-only (advisory lock), woken by NOTIFY, polling as fallback."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

from azync_flow.dag import DAG, DAGClient, DAGScheduler, TaskContext
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from tests.e2e.dag_util import runner


def _chain() -> DAG:
    d = DAG("loop")

    async def step(ctx: TaskContext) -> None:
        return None

    prev: list[str] = []
    for i in range(5):
        d.task(step, key=f"s{i}", after=prev)
        prev = [f"s{i}"]
    return d


async def _work(r, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if not await r.run_batch():
            await asyncio.sleep(0.01)


async def _until(store: PostgresStore, run_id, state: DAGState, seconds: float) -> float:
    t0 = time.monotonic()
    while (await store.get_dag(run_id)).state != state:
        assert time.monotonic() - t0 < seconds, f"not {state} within {seconds}s"
        await asyncio.sleep(0.01)
    return time.monotonic() - t0


async def test_one_leader_ticks_and_notify_drives_it_faster_than_polling(
    store: PostgresStore, pg_dsn: str
) -> None:
    d = _chain()
    stop = asyncio.Event()
    scheds = [DAGScheduler(store), DAGScheduler(store)]
    poll = timedelta(seconds=30)  # only push wake-ups can finish the chain in time
    loops = [
        asyncio.create_task(
            s.run(stop, dsn=pg_dsn, channel=store.channel, schema=store.schema, poll_interval=poll)
        )
        for s in scheds
    ]
    work = asyncio.create_task(_work(runner(store, d), stop))
    try:
        await asyncio.sleep(0.3)  # let one of them take the lock
        run = await DAGClient(store).run(d)
        took = await _until(store, run.id, DAGState.SUCCEEDED, 10)
        assert took < 10
        assert sorted(s.ticks > 0 for s in scheds) == [False, True]
    finally:
        stop.set()
        for t in [*loops, work]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, 10)


async def test_polling_alone_finishes_the_run_without_notifications(
    store: PostgresStore, pg_dsn: str
) -> None:
    d = _chain()
    stop = asyncio.Event()
    sched = DAGScheduler(store)
    # listening on a channel nobody notifies: progress comes from polling only
    loop = asyncio.create_task(
        sched.run(
            stop,
            dsn=pg_dsn,
            channel="nobody_notifies_here",
            schema=store.schema,
            poll_interval=timedelta(milliseconds=50),
        )
    )
    work = asyncio.create_task(_work(runner(store, d), stop))
    try:
        run = await DAGClient(store).run(d)
        await _until(store, run.id, DAGState.SUCCEEDED, 10)
        assert sched.ticks >= 5
    finally:
        stop.set()
        for t in (loop, work):
            await asyncio.wait_for(t, 10)
