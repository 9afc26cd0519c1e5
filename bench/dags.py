"""DAG benchmark: a 50-task fan-out/fan-in and a 20-step chain.

Measures wall time from ``run`` to the settled (succeeded) state, driven by
one in-process runner and the scheduler tick, plus scheduler ticks per
second (during the runs, and idle over an empty and a busy schema).

Run: ``python bench/dags.py [--repeat 5]`` (``$AZYNC_DSN`` or embedded PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from azync_flow import attach_dags
from azync_flow.dag import (
    DAG,
    DAG_LEADERSHIP,
    DAGClient,
    DAGRunner,
    DAGScheduler,
    TaskContext,
    run_until_settled,
)
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import open_store
from azync_flow.testing import drop_schema, unique_schema


async def _work(ctx: TaskContext) -> int:
    return len(ctx.task_results)


def fan(width: int = 48) -> DAG:
    """root -> ``width`` parallel tasks -> join: ``width + 2`` tasks."""
    d = DAG("bench_fan")
    d.task(_work, key="root")
    for i in range(width):
        d.task(_work, key=f"mid{i:02d}", after=["root"])
    d.task(_work, key="join", after=[f"mid{i:02d}" for i in range(width)])
    return d


def chain(length: int = 20) -> DAG:
    d = DAG("bench_chain")
    prev: list[str] = []
    for i in range(length):
        d.task(_work, key=f"s{i:02d}", after=prev)
        prev = [f"s{i:02d}"]
    return d


async def _one(store: object, client: DAGClient, dag: DAG) -> tuple[float, int, float]:
    runner = DAGRunner(store, [dag])  # type: ignore[arg-type]
    sched = DAGScheduler(store)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    run = await client.run(dag)
    view = await run_until_settled(store, runner, run.id, scheduler=sched, idle_sleep=0.001)
    elapsed = time.perf_counter() - t0
    assert view.state == DAGState.SUCCEEDED, view
    return elapsed, sched.ticks, sched.ticks / elapsed


async def _poll(pred: Callable[[], Awaitable[bool]], step: float = 0.002) -> None:
    for _ in range(int(60 / step)):
        if await pred():
            return
        await asyncio.sleep(step)
    raise TimeoutError("condition not met within 60 s")


async def _one_worker(store: object, client: DAGClient, dag: DAG) -> tuple[float, int, float]:
    """The same run on a real Worker (``azync_flow.worker``, branch queue): NOTIFY-driven."""
    worker_mod = importlib.import_module("azync_flow.worker")
    w = worker_mod.Worker(
        store, handle_signals=False, maintain=(), maintenance_interval=timedelta(seconds=0.05)
    )
    binding = attach_dags(w, [dag], concurrency=64)
    async with w:

        async def leading() -> bool:
            return bool(w.maintenance.is_leader(DAG_LEADERSHIP))

        await _poll(leading)
        t0 = time.perf_counter()
        run = await client.run(dag)

        async def settled() -> bool:
            return (await client.get(run.id)).state == DAGState.SUCCEEDED

        await _poll(settled)
        elapsed = time.perf_counter() - t0
    ticks = binding.scheduler.ticks
    return elapsed, ticks, ticks / elapsed


async def _tick_rate(store: object, seconds: float = 3.0) -> float:
    sched = DAGScheduler(store)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        await sched.tick()
    return sched.ticks / (time.perf_counter() - t0)


async def main(repeat: int, worker: bool) -> None:
    dsn, where = resolve_dsn()
    schema = unique_schema("bench")
    store = await open_store(dsn, Config(schema=schema))
    mode = "Worker + attach_dags" if worker else "run_until_settled driver"
    print(f"using {where}; schema {schema}; {repeat} runs each; {mode}")
    try:
        client = DAGClient(store)
        print(f"idle scheduler, empty schema: {await _tick_rate(store):8.0f} ticks/s")
        for name, dag in (("fan-out/fan-in (50 tasks)", fan()), ("chain (20 steps)", chain())):
            one = _one_worker if worker else _one
            rows = [await one(store, client, dag) for _ in range(repeat)]
            wall = statistics.median(r[0] for r in rows)
            ticks = statistics.median(r[1] for r in rows)
            rate = statistics.median(r[2] for r in rows)
            n = len(dag.tasks)
            print(
                f"{name:<26} start->settled median {wall * 1000:7.1f} ms "
                f"({n / wall:6.0f} tasks/s), {ticks:4.0f} ticks, {rate:6.0f} ticks/s"
            )
        busy = [await client.run(chain()) for _ in range(200)]
        async with store.pool.acquire() as conn:
            await conn.execute("ANALYZE")
        await asyncio.sleep(2.5)  # past the incremental overlap: steady state
        print(f"idle scheduler, {len(busy)} running DAGs: {await _tick_rate(store):8.0f} ticks/s")
    finally:
        await store.close()
        await drop_schema(dsn, schema)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help="drive with azync_flow.worker.Worker")
    args = ap.parse_args()
    asyncio.run(main(args.repeat, args.worker))
