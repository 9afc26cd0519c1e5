"""A worker whose workflow-task lease took everything due sleeps until woken:
it does not lease again at once only to find nothing, and nothing it should
run waits for its poll."""

from __future__ import annotations

import time
from datetime import timedelta

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.runtime.worker_runtime import WorkflowRuntime
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

#: Far longer than the test may take: a pass found by polling fails it.
POLL = timedelta(seconds=30)
RUNS = 12


@activity(name="lr_step")
async def step(n: int) -> int:
    return n + 1


@workflow(name="lr_steps")
async def steps(ctx: WorkflowContext, n: int) -> int:
    n = await step(n)
    n = await step(n)
    return n


class _Worker(Worker):
    runtime: WorkflowRuntime


async def test_sequential_runs_need_no_empty_lease_and_no_poll(store: PostgresStore) -> None:
    worker = _Worker(
        store,
        poll_interval=POLL,
        maintenance_interval=POLL,
        shutdown_grace=timedelta(milliseconds=200),
        handle_signals=False,
    )
    worker.runtime = attach_workflows(worker, [steps], [step])
    client = Client(store)
    async with worker:
        began = time.monotonic()
        for n in range(RUNS):
            handle = await client.start(steps, n)
            assert await handle.result(timeout=10) == n + 2
        took = time.monotonic() - began
        stats = worker.runtime.task_loop.stats
        leased, empty = stats.leased, stats.empty_dequeues
    assert took < POLL.total_seconds() / 3, took
    assert leased >= RUNS
    # Each run's tasks were leased in batches that took all that was due; a
    # second lease after each would make ``empty`` at least ``leased``.
    assert empty < leased / 2, (empty, leased)
