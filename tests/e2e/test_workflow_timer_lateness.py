"""Durable timers fire at their due time on a real worker, not at its next
poll: the worker that commits a timer wakes its task loop then, and a worker
that did not arm it learns the earliest due time when it polls."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from azync_flow import attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.runtime.worker_runtime import WorkflowRuntime
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

#: Far longer than any lateness allowed here: a timer found by polling fails.
POLL = timedelta(seconds=2)


@workflow(name="tl_short_sleep")
async def short_sleep(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(milliseconds=200))
    return n


@workflow(name="tl_long_sleep")
async def long_sleep(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(milliseconds=1500))
    return n


class _Worker(Worker):
    runtime: WorkflowRuntime


def _worker(store: PostgresStore) -> _Worker:
    worker = _Worker(
        store,
        poll_interval=POLL,
        maintenance_interval=POLL,
        shutdown_grace=timedelta(milliseconds=200),
        handle_signals=False,
    )
    worker.runtime = attach_workflows(worker, [short_sleep, long_sleep], [])
    return worker


async def _lateness(store: PostgresStore, run_ids: list[object]) -> list[float]:
    """Seconds from each timer's due time to the commit of the pass it woke
    (both on the database clock)."""
    rows = await store.pool.fetch(
        "SELECT extract(epoch FROM fired_at - fire_at)::float8 AS late "
        "FROM azync_workflow_timers WHERE workflow_id = ANY($1::uuid[])",
        run_ids,
    )
    assert len(rows) == len(run_ids)
    return sorted(float(r["late"]) for r in rows)


async def test_timers_armed_by_this_worker_fire_well_within_the_poll_interval(
    store: PostgresStore,
) -> None:
    worker = _worker(store)
    client = Client(store)
    async with worker:
        handles = [await client.start(short_sleep, n) for n in range(20)]
        results = await asyncio.gather(*(h.result(timeout=15) for h in handles))
    assert results == list(range(20))
    late = await _lateness(store, [h.id for h in handles])
    assert late[0] >= 0  # never before the due time
    assert late[-1] < POLL.total_seconds() / 4, late
    assert worker.runtime.task_loop.stats.due_wakes >= 1


async def test_a_worker_that_did_not_arm_a_timer_learns_its_due_time_when_it_polls(
    store: PostgresStore,
) -> None:
    client = Client(store)
    first = _worker(store)
    async with first:
        handle = await client.start(long_sleep, 1)
        for _ in range(200):  # until its first pass committed the timer
            if await store.pool.fetchval(
                "SELECT count(*) FROM azync_workflow_timers WHERE workflow_id = $1", handle.id
            ):
                break
            await asyncio.sleep(0.01)
    second = _worker(store)  # knows nothing of the timer but what it polls
    async with second:
        assert await handle.result(timeout=15) == 1
    (late,) = await _lateness(store, [handle.id])
    assert 0 <= late < POLL.total_seconds() / 4
    assert second.runtime.task_loop.stats.due_wakes >= 1
