"""A workflow resumes by a wake-up, not by the worker's fallback poll, when
what it waits for arrives while one of its passes is running.

The parallel activities of a pass run on a second worker (their own task
queue); their completions land a few ms apart. The first makes a workflow
task that runs at once; a later one makes a second workflow task while the
first is still active, so leases skip it, and the first pass then loses its
fence to the new history and is given up: giving it up wakes the loops for
the second task. Signals sent during a pass schedule a workflow task beside
the active one the same way: the pass's commit wakes the loops for it (the
worker polls only every 20 s here)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from azync_flow import WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

SLOW_POLL = timedelta(seconds=20)


@activity(name="remote_echo2", task_queue="remote")
async def remote_echo2(x: int) -> int:
    return x


@workflow(name="calls_remote2")
async def calls_remote2(ctx: WorkflowContext, n: int) -> list[int]:
    return list(await asyncio.gather(*(remote_echo2(i) for i in range(n))))


@workflow(name="counts_signals")
async def counts_signals(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for _ in range(n):
        total += await ctx.wait_signal("add", type=int)
    return total


async def _start(*runtimes: LocalRuntime) -> tuple[asyncio.Event, list[asyncio.Task[Any]]]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(r.run(stop)) for r in runtimes]
    await asyncio.sleep(1.0)  # every worker listening
    return stop, tasks


async def test_a_workflow_resumes_promptly_when_its_remote_parallel_activities_complete(
    store: PostgresStore,
) -> None:
    wf = LocalRuntime(store, Registry([calls_remote2], []), poll_interval=SLOW_POLL)
    acts = LocalRuntime(
        store, Registry([], [remote_echo2]), poll_interval=SLOW_POLL, task_queues=("remote",)
    )
    stop, tasks = await _start(wf, acts)
    slow: list[str] = []
    try:
        for round_ in range(6):
            t0 = time.monotonic()
            h = await Client(store).start(calls_remote2, 4)
            assert await h.result(timeout=60) == [0, 1, 2, 3]
            took = time.monotonic() - t0
            if took > 5.0:
                slow.append(f"round {round_}: {took:.1f}s")
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert slow == [], f"resumed by the 20 s poll, not a wake: {slow}"


async def test_a_workflow_resumes_promptly_when_signals_arrive_during_its_pass(
    store: PostgresStore,
) -> None:
    wf = LocalRuntime(store, Registry([counts_signals], []), poll_interval=SLOW_POLL)
    stop, tasks = await _start(wf)
    try:
        client = Client(store)
        slow: list[str] = []
        for round_ in range(4):
            h = await client.start(counts_signals, 6)
            t0 = time.monotonic()
            for i in range(6):
                await h.signal("add", i)
                await asyncio.sleep(0.005)
            assert await h.result(timeout=60) == 15
            took = time.monotonic() - t0
            if took > 5.0:
                slow.append(f"round {round_}: {took:.1f}s")
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert slow == [], f"resumed by the 20 s poll, not a wake: {slow}"
