"""Depth-first admission on a real Worker and PostgreSQL: when its activity slots
are taken, a worker continues the executions it has in flight before it starts
new ones, and tasks of executions in flight never wait behind new starts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext


@activity(name="depth_step")
async def depth_step(i: int) -> int:
    await asyncio.sleep(0.02)
    return i + 1


@workflow(name="depth_three")
async def depth_three(ctx: WorkflowContext, i: int) -> int:
    return await depth_step(await depth_step(await depth_step(i)))


@workflow(name="depth_waiter")
async def depth_waiter(ctx: WorkflowContext, _: None) -> str:
    return str(await ctx.wait_signal("go", timeout=timedelta(seconds=30)))


def make_worker(store: PostgresStore) -> Worker:
    worker = Worker(
        store,
        concurrency=8,
        poll_interval=timedelta(seconds=5),  # admission must not wait for a poll
        maintenance_interval=timedelta(milliseconds=100),
        maintain=(),
        handle_signals=False,
    )
    attach_workflows(worker, [depth_three, depth_waiter], [depth_step], activity_concurrency=2)
    return worker


async def first_passes_before_first_completion(store: PostgresStore) -> int:
    """Executions whose first pass committed before any execution completed."""
    return int(
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_jobs j WHERE j.first_pass AND j.state = 'succeeded'"
            " AND j.completed_at < (SELECT min(completed_at) FROM azync_workflow_executions"
            " WHERE name = 'depth_three')"
        )
    )


async def test_a_burst_of_starts_is_run_depth_first_when_activity_slots_are_scarce(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handles = [await client.start(depth_three, i) for i in range(12)]
    async with make_worker(store):
        results = [await h.result(timeout=30) for h in handles]
    assert results == [i + 3 for i in range(12)]
    # Breadth-first, all 12 first passes (8 per lease) commit before the first
    # execution's third activity; depth-first admits only what 2 slots can run.
    assert await first_passes_before_first_completion(store) <= 4


async def test_a_signal_to_an_execution_in_flight_does_not_wait_behind_new_starts(
    store: PostgresStore,
) -> None:
    client = Client(store)
    worker = make_worker(store)
    async with worker:
        waiter = await client.start(depth_waiter, None)
        awaited = "SELECT awaited_signals FROM azync_workflow_executions WHERE id = $1"
        for _ in range(1500):
            if await store.pool.fetchval(awaited, waiter.id) == ["go"]:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the waiter never blocked on signal go")
        burst = [await client.start(depth_three, i) for i in range(30)]
        await waiter.signal("go", "now")
        assert await waiter.result(timeout=30) == "now"
        waiter_done = (await waiter.describe()).completed_at
        finished = [await h.result(timeout=60) for h in burst]
    assert finished == [i + 3 for i in range(30)]
    last_first_pass = await store.pool.fetchval(
        "SELECT max(completed_at) FROM azync_jobs WHERE first_pass AND run_id = any($1::uuid[])",
        [h.id for h in burst],
    )
    assert waiter_done is not None
    assert waiter_done < last_first_pass  # the signal's pass did not queue behind the starts
