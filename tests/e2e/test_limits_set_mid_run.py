"""A task-queue limit set while workflows run; describe's blocked reasons."""

from __future__ import annotations

import asyncio
import time

from azync_flow import ConcurrencyLimit, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

NOW = {"in": 0}
SAMPLES: list[tuple[float, int]] = []


@activity(name="busy")
async def busy(x: int) -> int:
    NOW["in"] += 1
    SAMPLES.append((time.monotonic(), NOW["in"]))
    try:
        await asyncio.sleep(0.15)
    finally:
        NOW["in"] -= 1
    return x


@workflow(name="rounds")
async def rounds(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for r in range(n):
        total += sum(await asyncio.gather(*(busy(r * 10 + i) for i in range(4))))
    return total


@activity(name="nowhere", task_queue="nowhere")
async def nowhere(x: int) -> int:
    return x


@activity(name="gated", limits=[ConcurrencyLimit("gate", 1)])
async def gated(x: int) -> int:
    await asyncio.sleep(3)
    return x


@workflow(name="stuck")
async def stuck(ctx: WorkflowContext) -> list[int]:
    return list(await asyncio.gather(nowhere(1), gated(2), gated(3)))


async def test_a_task_queue_limit_set_mid_run_caps_activities_scheduled_after_it(
    store: PostgresStore,
) -> None:
    SAMPLES.clear()
    runtime = LocalRuntime(store, Registry([rounds], [busy]))
    stop = asyncio.Event()
    running = asyncio.create_task(runtime.run(stop))
    client = Client(store)
    try:
        hs = [await client.start(rounds, 12) for _ in range(6)]
        await asyncio.sleep(0.4)
        await client.set_task_queue_limit("default", ConcurrencyLimit("queue-cap", 2))
        set_at = time.monotonic()
        got = await asyncio.gather(*(h.result(timeout=120) for h in hs))
        assert got == [sum(r * 40 + 6 for r in range(12))] * 6
    finally:
        stop.set()
        await running
    later = [n for t, n in SAMPLES if t > set_at + 0.5]
    assert later, "the workflows finished before the limit mattered"
    assert max(later) <= 2, max(later)


def _cli_out(argv: list[str]) -> str:
    import contextlib
    import io

    from azync_flow.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


async def test_describe_and_the_cli_name_the_missing_worker_and_the_limit_wait(
    store: PostgresStore, pg_dsn: str
) -> None:
    runtime = LocalRuntime(store, Registry([stuck], [gated]))
    stop = asyncio.Event()
    running = asyncio.create_task(runtime.run(stop))
    try:
        h = await Client(store).start(stuck)
        want_a = "no live worker serves activity 'nowhere' on task queue 'default'"
        want_b = "waits for concurrency limit 'gate'"
        async with asyncio.timeout(20):
            while True:
                reason = (await h.describe()).blocked_reason
                if want_b in reason and "no live worker" in reason:
                    break
                await asyncio.sleep(0.1)
        assert "no live worker serves activity 'nowhere' on task queue 'nowhere'" in reason, reason
        assert want_a not in reason
        for args in (["workflows", "show", str(h.id), "--json"], ["workflows", "list", "--json"]):
            out = await asyncio.to_thread(
                _cli_out, [*args, "--dsn", pg_dsn, "--schema", store.schema]
            )
            assert "no live worker serves activity 'nowhere' on task queue 'nowhere'" in out, out
            assert "gate" in out, out
    finally:
        stop.set()
        await running
