"""Depth-first admission must not starve new executions: a worker whose one
activity kind is taken by long-running attempts (a watcher holding its slot for
hours) still starts executions that never call that activity."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

released = asyncio.Event()


@activity(name="starve_watch")
async def starve_watch(_: None) -> str:
    await released.wait()  # a long-running attempt: holds its slot until released
    return "watched"


@activity(name="starve_step")
async def starve_step(i: int) -> int:
    return i + 1


@workflow(name="starve_watcher")
async def starve_watcher(ctx: WorkflowContext, _: None) -> str:
    return await starve_watch(None)


@workflow(name="starve_quick")
async def starve_quick(ctx: WorkflowContext, i: int) -> int:
    return await starve_step(i)


async def test_a_long_running_activity_does_not_stop_the_worker_starting_new_executions(
    store: PostgresStore,
) -> None:
    released.clear()
    worker = Worker(
        store,
        concurrency=8,
        poll_interval=timedelta(seconds=1),
        maintenance_interval=timedelta(milliseconds=100),
        maintain=(),
        handle_signals=False,
    )
    attach_workflows(
        worker, [starve_watcher, starve_quick], [starve_watch, starve_step], activity_concurrency=1
    )
    client = Client(store)
    async with worker:
        watcher = await client.start(starve_watcher, None)
        running = (
            "SELECT count(*) FROM azync_jobs WHERE kind LIKE '%starve_watch%' AND state = 'active'"
        )
        for _ in range(1500):
            if await store.pool.fetchval(running) == 1:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the watcher's activity never started")
        quick = await client.start(starve_quick, 1)
        try:
            # starve_quick never calls starve_watch: its slot being taken is no
            # reason to hold its first pass back (this worker is the only one)
            assert await quick.result(timeout=20) == 2
        finally:
            released.set()
        assert await watcher.result(timeout=20) == "watched"
