"""The bench/workflows.py workflows on azync_flow, and the processes that run them.

    python bench/_flow_workload.py worker --dsn DSN [--concurrency C] [--metrics]
    python bench/_flow_workload.py subscriber --dsn DSN [--concurrency C]
    python bench/_flow_workload.py commits --dsn DSN -n K [--eager]

Run by ``bench/workflows.py``, which imports the definitions below for its client:

* ``worker``: a real ``Worker`` registering every workflow and activity here, alone
  in its process; prints ``{"ready": true}`` once its lease loops run, then answers
  one JSON command per stdin line and stops gracefully when stdin closes:

  - ``{"cmd": "cpu"}``: ``{"cpu_s": time.process_time()}`` (this process's CPU
    seconds, all threads);
  - ``{"cmd": "metrics"}``: with ``--metrics`` (metrics recorded by the SDK and
    served for Prometheus, as ``azync-flow worker --metrics-port`` does),
    ``{"text": ...}``, the exposition of this process;
  - ``{"cmd": "sequential", "n": N}``: N three-activity workflows one at a time
    through a client bound to this worker (``Client.for_worker(worker)``, the
    in-process eager path), start -> result; ``{"latencies_ms": [...]}``.
* ``subscriber``: a ``Worker`` running only the subscriber ``bench_sink`` of event
  type ``bench.ping`` (registered before ``{"ready": true}``), which counts its
  deliveries; ``{"cmd": "until", "count": C}`` answers once C deliveries ran, with
  ``{"at": time.time()}`` of the delivery that reached C (the wall clock, which
  the bench process shares).
* ``commits``: a worker and a plain (remote-path) ``Client`` in one process start K
  three-activity workflows, then wait for all with one aggregate query per 100 ms,
  then exit; the caller reads ``pg_stat_database`` around this process (its
  backends' exit flushes the stats). ``--eager``: the client is bound to the
  worker (``Client.for_worker(worker)``), so each start commits with its first pass.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow import (
    ConcurrencyLimit,
    WorkflowContext,
    activity,
    attach_subscribers,
    attach_workflows,
    subscriber,
    workflow,
)
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.worker import Worker

#: Worker concurrency (per lease loop); the pool gets 4 connections more (20 in all, as
#: DBOS's default system-database pool: the server is shared, connections are scarce).
DEFAULT_CONCURRENCY = 16


@activity(name="step_a")
async def step_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


@activity(name="step_b")
async def step_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


@activity(name="step_c")
async def step_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


@workflow(name="three")
async def three(ctx: WorkflowContext, i: int) -> dict[str, int]:
    return await step_c(await step_b(await step_a(i)))


#: The generous global limit of the limited 3-activity workflow (bench/workflows.py
#: --limits): never reached by one worker of DEFAULT_CONCURRENCY, so the row shows
#: what admission through the limit's slots costs.
BENCH_LIMIT = ConcurrencyLimit("bench-steps", 1000)


@activity(name="limited_a", limits=[BENCH_LIMIT])
async def limited_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


@activity(name="limited_b", limits=[BENCH_LIMIT])
async def limited_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


@activity(name="limited_c", limits=[BENCH_LIMIT])
async def limited_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


@workflow(name="three_limited")
async def three_limited(ctx: WorkflowContext, i: int) -> dict[str, int]:
    """``three`` whose activities share the global limit ``BENCH_LIMIT``."""
    return await limited_c(await limited_b(await limited_a(i)))


@workflow(name="waiter")
async def waiter(ctx: WorkflowContext, _: None) -> Any:
    return await ctx.wait_signal("go", timeout=timedelta(seconds=30))


@activity(name="step")
async def step(i: int) -> int:
    return i + 1


@workflow(name="fan")
async def fan(ctx: WorkflowContext, i: int) -> int:
    """Ten activities at once (``asyncio.gather``), then their sum."""
    return sum(await asyncio.gather(*(step(i + k) for k in range(10))))


@workflow(name="long")
async def long(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for i in range(n):
        total += await step(i)
    return total


#: Event type and subscriber name of the publish workload.
PING, SINK = "bench.ping", "bench_sink"


@dataclass
class Deliveries:
    """Deliveries the subscriber ran, and the wall-clock time each count was reached."""

    count: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    at: dict[int, float] = field(default_factory=dict)


DELIVERIES = Deliveries()


@subscriber(PING, name=SINK)
async def sink(payload: dict[str, int]) -> None:
    DELIVERIES.count += 1
    DELIVERIES.at[DELIVERIES.count] = time.time()
    DELIVERIES.changed.set()


@workflow(name="parked_signal")
async def parked_signal(ctx: WorkflowContext, i: int) -> Any:
    """One activity, then a wait for signal ``go`` with no timeout (bench/idle.py)."""
    await step_a(i)
    return await ctx.wait_signal("go")


@workflow(name="parked_deadline")
async def parked_deadline(ctx: WorkflowContext, i: int) -> Any:
    """One activity, then a wait for signal ``go`` for at most 30 days (a timer)."""
    await step_a(i)
    return await ctx.wait_signal("go", timeout=timedelta(days=30))


@workflow(name="parked_sleep")
async def parked_sleep(ctx: WorkflowContext, i: int) -> int:
    """One activity, then a 30-day sleep (a timer and a scheduled workflow task)."""
    await step_a(i)
    await ctx.sleep(timedelta(days=30))
    return i


#: The workflows bench/idle.py parks (and clones) in the store.
PARKED = (parked_signal, parked_deadline, parked_sleep)


@contextlib.asynccontextmanager
async def flow_worker(
    dsn: str, concurrency: int, *, subscribers: bool = False
) -> AsyncIterator[Worker]:
    """A running worker for every workflow here (``subscribers``: for the ``sink``
    subscriber only, registered before it yields); yields it (``worker.store``)."""
    store = await open_store(dsn, Config(max_pool_size=concurrency + 4), migrate=False)
    worker = Worker(
        store,
        concurrency=concurrency,
        poll_interval=timedelta(seconds=1),
        maintenance_interval=timedelta(seconds=1),
        handle_signals=False,
    )
    binding = None
    if subscribers:
        binding = attach_subscribers(worker, [sink])
    else:
        attach_workflows(
            worker,
            [three, three_limited, waiter, fan, *PARKED],
            [step_a, step_b, step_c, step, limited_a, limited_b, limited_c],
        )
    try:
        async with worker:
            if binding is not None:
                await binding.register()
            yield worker
    finally:
        await store.close()


async def eager_sequential(worker: Worker, n: int) -> list[float]:
    """N three-activity workflows one at a time through a client bound to ``worker``."""
    client = Client.for_worker(worker)
    lat = []
    try:
        for i in range(n + 3):
            a = time.perf_counter()
            handle = await client.start(three, i)
            assert (await handle.result(timeout=60))["c"] == 3
            if i >= 3:  # the first three warm the bound client up
                lat.append((time.perf_counter() - a) * 1000)
    finally:
        await client.close()
    return lat


async def until_delivered(count: int) -> float:
    while DELIVERIES.count < count:
        DELIVERIES.changed.clear()
        await DELIVERIES.changed.wait()
    return DELIVERIES.at[count]


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode())


async def serve(
    dsn: str, concurrency: int, subscribers: bool = False, metrics: bool = False
) -> None:
    url = ""
    if metrics:
        from azync_flow.telemetry.metrics import start_prometheus_server

        url = start_prometheus_server(0).url
    async with flow_worker(dsn, concurrency, subscribers=subscribers) as worker:
        print(json.dumps({"ready": True}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)
            reply: dict[str, Any]
            if cmd.get("cmd") == "cpu":
                reply = {"cpu_s": time.process_time()}
            elif cmd.get("cmd") == "metrics":
                reply = {"text": await asyncio.to_thread(_scrape, url) if url else ""}
            elif cmd.get("cmd") == "sequential" and not subscribers:
                reply = {"latencies_ms": await eager_sequential(worker, int(cmd["n"]))}
            elif cmd.get("cmd") == "until" and subscribers:
                reply = {"at": await until_delivered(int(cmd["count"]))}
            else:
                raise SystemExit(f"unknown command {line!r}")
            print(json.dumps(reply), flush=True)


async def commits_run(dsn: str, k: int, concurrency: int, eager: bool = False) -> None:
    async with flow_worker(dsn, concurrency) as worker:
        store: PostgresStore = worker.store  # type: ignore[assignment]
        client = Client.for_worker(worker) if eager else Client(store)
        ids = [(await client.start(three, i)).id for i in range(k)]
        query = (
            "SELECT count(*) FROM azync_workflow_executions"
            " WHERE id = any($1::uuid[]) AND state = 'succeeded'"
        )
        for _ in range(6000):
            if await store.pool.fetchval(query, ids) == k:
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("workflows of the commit count did not finish in 10 min")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["worker", "subscriber", "commits"])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("-n", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--eager", action="store_true", help="commits: a client bound to the worker")
    ap.add_argument("--metrics", action="store_true", help="worker: record and serve metrics")
    args = ap.parse_args()
    if args.mode in ("worker", "subscriber"):
        asyncio.run(
            serve(
                args.dsn,
                args.concurrency,
                subscribers=args.mode == "subscriber",
                metrics=args.metrics,
            )
        )
    else:
        asyncio.run(commits_run(args.dsn, args.n, args.concurrency, args.eager))


if __name__ == "__main__":
    main()
