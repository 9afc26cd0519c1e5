"""DAG benchmark: a 50-task fan-out/fan-in and a 20-step chain.

Measures wall time from ``run`` to the settled (succeeded) state, driven by
one in-process runner and the scheduler tick, plus scheduler ticks per
second (during the runs, and idle over an empty and a busy schema).

Run: ``python bench/dags.py [--repeat 5]`` (``$AZYNC_DSN`` or embedded PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from azync_flow.dag import DAG, DAGClient, DAGRunner, DAGScheduler, TaskContext, run_until_settled
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config, DAGState
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


async def _tick_rate(store: object, seconds: float = 3.0) -> float:
    sched = DAGScheduler(store)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        await sched.tick()
    return sched.ticks / (time.perf_counter() - t0)


async def main(repeat: int) -> None:
    dsn, where = resolve_dsn()
    schema = unique_schema("bench")
    store = await open_store(dsn, Config(schema=schema))
    print(f"using {where}; schema {schema}; {repeat} runs each")
    try:
        client = DAGClient(store)
        print(f"idle scheduler, empty schema: {await _tick_rate(store):8.0f} ticks/s")
        for name, dag in (("fan-out/fan-in (50 tasks)", fan()), ("chain (20 steps)", chain())):
            rows = [await _one(store, client, dag) for _ in range(repeat)]
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
    asyncio.run(main(ap.parse_args().repeat))
