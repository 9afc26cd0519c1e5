"""The bench/workflows.py workflows on azync_flow, and the processes that run them.

    python bench/_flow_workload.py worker --dsn DSN [--concurrency C]
    python bench/_flow_workload.py commits --dsn DSN -n K [--eager]

Run by ``bench/workflows.py``, which imports the definitions below for its client:

* ``worker``: a real ``Worker`` registering every workflow and activity here, alone
  in its process; prints ``{"ready": true}`` once its lease loops run, then answers
  each stdin line ``{"cmd": "cpu"}`` with ``{"cpu_s": time.process_time()}`` (this
  process's CPU seconds, all threads) and stops gracefully when stdin closes.
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
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from azync_flow import attach_workflows

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow import WorkflowContext, activity, workflow
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
async def flow_worker(dsn: str, concurrency: int) -> AsyncIterator[Worker]:
    """A running worker for every workflow here; yields it (``worker.store``)."""
    store = await open_store(dsn, Config(max_pool_size=concurrency + 4), migrate=False)
    worker = Worker(
        store,
        concurrency=concurrency,
        poll_interval=timedelta(seconds=1),
        maintenance_interval=timedelta(seconds=1),
        handle_signals=False,
    )
    attach_workflows(worker, [three, waiter, fan, *PARKED], [step_a, step_b, step_c, step])
    try:
        async with worker:
            yield worker
    finally:
        await store.close()


async def serve(dsn: str, concurrency: int) -> None:
    async with flow_worker(dsn, concurrency):
        print(json.dumps({"ready": True}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            cmd = json.loads(line)
            if cmd.get("cmd") != "cpu":
                raise SystemExit(f"unknown command {line!r}")
            print(json.dumps({"cpu_s": time.process_time()}), flush=True)


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
    ap.add_argument("mode", choices=["worker", "commits"])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("-n", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--eager", action="store_true", help="commits: a client bound to the worker")
    args = ap.parse_args()
    if args.mode == "worker":
        asyncio.run(serve(args.dsn, args.concurrency))
    else:
        asyncio.run(commits_run(args.dsn, args.n, args.concurrency, args.eager))


if __name__ == "__main__":
    main()
