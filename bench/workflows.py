"""Workflow benchmark (preliminary): N workflows of 3 activities end to end, and
replay-pass time vs history length.

    python bench/workflows.py --n 500 --concurrency 8

Uses ``$AZYNC_DSN`` (or an embedded server) and a fresh schema it drops at the end.
Drives the in-process ``LocalRuntime`` (one process, ``--concurrency`` runtimes).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import msgspec

from azync_flow import Registry, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.replay import (
    ActivityCompleted,
    ActivityScheduled,
    HistoryEntry,
    WorkflowInfo,
    WorkflowInstance,
    run_pass,
)
from azync_flow.runtime import LocalRuntime
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.testing import drop_schema, unique_schema


@activity(name="step")
async def step(i: int) -> int:
    return i + 1


@workflow(name="three")
async def three(ctx: WorkflowContext, x: int) -> int:
    return await step(await step(await step(x)))


@workflow(name="long")
async def long(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for i in range(n):
        total += await step(i)
    return total


async def end_to_end(dsn: str, n: int, concurrency: int) -> None:
    schema = unique_schema("bench")
    in_flight = asyncio.Semaphore(32)
    store = await open_store(dsn, Config(schema=schema, max_pool_size=concurrency + 36))
    try:
        registry = Registry([three], [step])
        client = Client(store, poll_interval=__import__("datetime").timedelta(milliseconds=50))
        runtimes = [LocalRuntime(store, registry, batch=20) for _ in range(concurrency)]
        stop = asyncio.Event()
        poll = __import__("datetime").timedelta(milliseconds=5)
        workers = [asyncio.create_task(r.run(stop, poll)) for r in runtimes]
        started = time.perf_counter()
        latencies: list[float] = []

        async def one(i: int) -> None:
            async with in_flight:
                t0 = time.perf_counter()
                handle = await client.start(three, i)
                assert await handle.result(timeout=120) == i + 3
                latencies.append(time.perf_counter() - t0)

        try:
            await asyncio.gather(*(one(i) for i in range(n)))
        finally:
            elapsed = time.perf_counter() - started
            stop.set()
            await asyncio.gather(*workers, return_exceptions=True)
        latencies.sort()
        print(
            f"end to end: {n} workflows x 3 activities in {elapsed:.2f}s = {n / elapsed:.0f} wf/s; "
            f"start-to-finish p50 {statistics.median(latencies) * 1000:.1f} ms, "
            f"p99 {latencies[int(len(latencies) * 0.99) - 1] * 1000:.1f} ms; "
            "commits per workflow: 8 (start, 4 passes, 3 activity completions)"
        )
    finally:
        await store.close()
        await drop_schema(dsn, schema)


def replay_times() -> None:
    info = WorkflowInfo(uuid.uuid4(), "long")
    for events in (10, 100, 1_000, 10_000):
        steps = events // 2
        history = []
        for i in range(steps):
            seq = len(history) + 1
            raw = msgspec.Raw(b"[%d]" % i)
            history.append(HistoryEntry(seq, ActivityScheduled(seq=seq, name="step", input=raw)))
            history.append(
                HistoryEntry(
                    seq + 1, ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(b"1"))
                )
            )
        t0 = time.perf_counter()
        run_pass(long, b"%d" % (steps + 1000), history, info=info)
        full = time.perf_counter() - t0
        instance = WorkflowInstance(long, b"%d" % (steps + 1000), info)
        instance.advance(history)
        seq = len(history) + 1
        samples = []
        for _ in range(200):
            new = [
                HistoryEntry(
                    seq + 1, ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(b"1"))
                )
            ]
            t0 = time.perf_counter()
            instance.advance(new)
            samples.append(time.perf_counter() - t0)
            seq += 2
        print(
            f"replay at {events:>6} events: full replay {full * 1000:8.2f} ms, "
            f"cached pass p50 {statistics.median(samples) * 1e6:6.1f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    replay_times()
    dsn, where = resolve_dsn()
    print(f"using {where}")
    asyncio.run(end_to_end(dsn, args.n, args.concurrency))


if __name__ == "__main__":
    main()
