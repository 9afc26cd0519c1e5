"""Operations a workflow pass schedules (fast and admitting insert paths),
end to end through real workers on real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import asyncpg

from azync_flow import (
    ConcurrencyLimit,
    RetryPolicy,
    WorkflowContext,
    activity,
    workflow,
)
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

CALLS: dict[str, int] = {}
STARTS: dict[str, float] = {}


@activity(name="plain")
async def plain(x: int) -> int:
    CALLS[f"plain-{x}"] = CALLS.get(f"plain-{x}", 0) + 1
    await asyncio.sleep(0.01)
    return x * 2


@activity(
    name="keyed",
    limits=[ConcurrencyLimit("keyed", 1, per_key=True)],
    limit_key=lambda key, x: key,
)
async def keyed(key: str, x: int) -> int:
    await asyncio.sleep(0.01)
    return x + 1000


@workflow(name="mixed")
async def mixed(ctx: WorkflowContext, n: int) -> list[int]:
    calls: list[Any] = []
    for i in range(n):
        calls.append(plain(i))
        calls.append(keyed(f"k{i % 2}", i))
    return list(await asyncio.gather(*calls))


@activity(name="remote_echo", task_queue="remote")
async def remote_echo(x: int) -> int:
    STARTS[f"r{x}"] = time.monotonic()
    return x


@workflow(name="calls_remote")
async def calls_remote(ctx: WorkflowContext, n: int) -> list[int]:
    return list(await asyncio.gather(*(remote_echo(i) for i in range(n))))


@activity(
    name="flaky",
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5, jitter=0),
)
async def flaky(tag: str) -> str:
    CALLS[tag] = CALLS.get(tag, 0) + 1
    if CALLS[tag] < 3:
        raise RuntimeError(f"flaky {tag} attempt {CALLS[tag]}")
    return f"{tag}:{CALLS[tag]}"


@activity(name="doomed", retry=RetryPolicy(maximum_attempts=1))
async def doomed(tag: str) -> str:
    raise ValueError(f"doomed {tag}")


@workflow(name="fail_and_succeed")
async def fail_and_succeed(ctx: WorkflowContext, tag: str) -> list[str]:
    res = await asyncio.gather(doomed(tag), plain(7), flaky(tag), return_exceptions=True)
    out = []
    for r in res:
        out.append(f"error:{type(r).__name__}" if isinstance(r, BaseException) else str(r))
    # a second pass schedules more after the failures
    out.append(str(await plain(8)))
    return out


@workflow(name="gather10")
async def gather10(ctx: WorkflowContext, base: int) -> int:
    vals = await asyncio.gather(*(plain(base * 100 + i) for i in range(10)))
    return sum(vals)


async def _jobs_per_key(store: PostgresStore, dsn: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            f"SELECT run_id, task_key, count(*) AS n, array_agg(state) AS states"
            f' FROM "{store.schema}".azync_jobs'
            f" WHERE source = 'workflow' AND task_key <> '$wft'"
            f" GROUP BY run_id, task_key"
        )
    finally:
        await conn.close()


async def _run(runtime: LocalRuntime) -> tuple[asyncio.Event, asyncio.Task[Any]]:
    stop = asyncio.Event()
    return stop, asyncio.create_task(runtime.run(stop))


async def test_a_pass_mixing_limited_and_unlimited_activities_returns_every_result(
    store: PostgresStore, pg_dsn: str
) -> None:
    runtime = LocalRuntime(store, Registry([mixed], [plain, keyed]))
    stop, running = await _run(runtime)
    try:
        handles = [await Client(store).start(mixed, 6) for _ in range(5)]
        for h in handles:
            got = await h.result(timeout=60)
            assert got == [v for i in range(6) for v in (i * 2, i + 1000)]
    finally:
        stop.set()
        await running
    for r in await _jobs_per_key(store, pg_dsn):
        assert r["n"] == 1, dict(r)


async def test_a_dead_lettered_activity_beside_retried_and_plain_ones_in_one_pass(
    store: PostgresStore, pg_dsn: str
) -> None:
    CALLS.clear()
    runtime = LocalRuntime(store, Registry([fail_and_succeed], [plain, doomed, flaky]))
    stop, running = await _run(runtime)
    try:
        hs = [await Client(store).start(fail_and_succeed, f"t{i}") for i in range(4)]
        for i, h in enumerate(hs):
            got = await h.result(timeout=60)
            assert got == ["error:ActivityError", "14", f"t{i}:3", "16"], got
    finally:
        stop.set()
        await running
    for r in await _jobs_per_key(store, pg_dsn):
        assert r["n"] == 1, dict(r)


async def test_two_hundred_workflows_of_ten_parallel_activities_all_finish_right(
    store: PostgresStore, pg_dsn: str
) -> None:
    runtime = LocalRuntime(store, Registry([gather10], [plain]), batch=100)
    stop, running = await _run(runtime)
    try:
        client = Client(store)
        hs = await asyncio.gather(*(client.start(gather10, b) for b in range(200)))
        got = await asyncio.gather(*(h.result(timeout=120) for h in hs))
        assert got == [sum((b * 100 + i) * 2 for i in range(10)) for b in range(200)]
    finally:
        stop.set()
        await running
    rows = await _jobs_per_key(store, pg_dsn)
    assert len(rows) == 2000
    assert all(r["n"] == 1 and r["states"] == ["succeeded"] for r in rows)
