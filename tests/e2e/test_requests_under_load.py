"""Signals and updates sent at random moments to executions that loop on them are
each processed promptly: none is left buffered without a workflow task to run
it (a request that commits while its execution's task is being leased reaches
that task's pass). Both cache modes, a real worker, real PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

EXECUTIONS = 200
SIGNALS = 2  # per execution, then one "stop"
BOUND = 10.0  # seconds from a request's send to its effect


@workflow(name="rl_loop")
async def request_loop(ctx: WorkflowContext) -> dict[str, int]:
    bumps = 0
    ticks = 0

    @ctx.update()
    def bump() -> int:
        nonlocal bumps
        bumps += 1
        return bumps

    while True:
        payload = await ctx.wait_signal("tick")
        if payload == "stop":
            return {"ticks": ticks, "bumps": bumps}
        ticks += 1


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
async def running(request: pytest.FixtureRequest, store: PostgresStore) -> AsyncIterator[None]:
    runtime = LocalRuntime(store, Registry([request_loop], []), cache_size=request.param, batch=50)
    async with runtime.worker:
        yield


async def test_every_request_sent_at_a_random_moment_is_processed_within_bounds(
    store: PostgresStore, running: None
) -> None:
    client = Client(store)
    rng = random.Random(7)
    handles = [await client.start(request_loop) for _ in range(EXECUTIONS)]
    late: list[str] = []

    async def drive(i: int) -> None:
        h = handles[i]
        for n in range(SIGNALS):
            await asyncio.sleep(rng.uniform(0, 0.3))
            await h.signal("tick", n, message_id=f"t{n}")
            await asyncio.sleep(rng.uniform(0, 0.1))
            try:
                got = await h.update("bump", update_id=f"u{n}", timeout=BOUND)
            except TimeoutError:
                late.append(f"execution {i}: update u{n} not processed in {BOUND}s")
                return
            assert got == n + 1
        await h.signal("tick", "stop", message_id="stop")
        try:
            result = await h.result(timeout=BOUND)
        except TimeoutError:
            late.append(f"execution {i}: signals not all processed in {BOUND}s")
            return
        assert result == {"ticks": SIGNALS, "bumps": SIGNALS}

    await asyncio.gather(*(drive(i) for i in range(EXECUTIONS)))
    assert late == []
