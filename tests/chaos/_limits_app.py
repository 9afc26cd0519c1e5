"""Worker process for the limits tests: a real Worker whose limited activities
and queue jobs record when they run, in the test's table ``limit_runs``.

    python _limits_app.py DSN SCHEMA MODE EXPECTED

MODE:
    activities  the ``fan_out`` workflow runs ``guarded`` (ConcurrencyLimit
                "guarded" of GUARDED_LIMIT) on each item; exits once EXPECTED
                executions exist and none runs
    fair        queue kind ``fair`` (ConcurrencyLimit "fair" of 2 per key);
                exits once EXPECTED jobs of the kind exist and all succeeded
    rate        queue kind ``rated`` (RateLimit "rated": 5 per second); as ``fair``
    gpu         the ``gpu_work`` workflow runs ``render`` and ``train`` (two kinds
                without limits of their own) on task queue ``gpu``, which the
                worker limits to GPU_LIMIT in flight; exits as ``activities``
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Any

from azync_flow import (
    ConcurrencyLimit,
    RateLimit,
    WorkflowContext,
    activity,
    attach_workflows,
    workflow,
)
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker

STORE: Any = None
GUARDED_LIMIT = 3
GPU_LIMIT = 3
HOLD = float(os.environ.get("HOLD", "0.2"))


async def _run(what: str, key: str) -> None:
    row = await STORE.pool.fetchval(
        "INSERT INTO limit_runs (what, key, pid, started_at) "
        "VALUES ($1, $2, $3, clock_timestamp()) RETURNING id",
        what,
        key,
        os.getpid(),
    )
    await asyncio.sleep(HOLD)
    await STORE.pool.execute(
        "UPDATE limit_runs SET ended_at = clock_timestamp() WHERE id = $1", row
    )


@activity(name="guarded", limits=[ConcurrencyLimit("guarded", GUARDED_LIMIT)])
async def guarded(item: str) -> str:
    await _run("guarded", item)
    return item


@workflow(name="fan_out")
async def fan_out(ctx: WorkflowContext, items: list[str]) -> list[str]:
    return list(await asyncio.gather(*(guarded(i) for i in items)))


@activity(name="render", task_queue="gpu")
async def render(item: str) -> str:
    await _run("render", item)
    return f"r-{item}"


@activity(name="train", task_queue="gpu")
async def train(item: str) -> str:
    await _run("train", item)
    return f"t-{item}"


@workflow(name="gpu_work")
async def gpu_work(ctx: WorkflowContext, items: list[str]) -> list[str]:
    calls = [render(i) for i in items] + [train(i) for i in items]
    return list(await asyncio.gather(*calls))


async def fair(payload: dict[str, str]) -> None:
    await _run("fair", payload["key"])


async def rated(payload: dict[str, str]) -> None:
    await _run("rated", payload["key"])


async def _finished(mode: str, expected: int) -> bool:
    if mode in ("activities", "gpu"):
        row = await STORE.pool.fetchrow(
            "SELECT count(*) AS n, count(*) FILTER (WHERE state = 'running') AS running "
            "FROM azync_workflow_executions"
        )
    else:
        row = await STORE.pool.fetchrow(
            "SELECT count(*) AS n, count(*) FILTER (WHERE state <> 'succeeded') AS running "
            "FROM azync_jobs WHERE source = 'queue' AND kind = $1",
            mode if mode == "fair" else "rated",
        )
    return bool(row["n"] >= expected and row["running"] == 0)


async def main(dsn: str, schema: str, mode: str, expected: int) -> None:
    global STORE
    STORE = await open_store(dsn, Config(schema=schema), migrate=False)
    worker = Worker(
        STORE,
        lease=timedelta(seconds=5),
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=200),
        leader_ttl=timedelta(seconds=2),
        handle_signals=False,
        concurrency=int(os.environ.get("CONCURRENCY", "4")),
        task_queues=("default", "gpu"),
        task_queue_limits={"gpu": ConcurrencyLimit("gpu", GPU_LIMIT)} if mode == "gpu" else None,
    )
    if mode == "activities":
        attach_workflows(worker, [fan_out], [guarded], local_dispatch=True)
    elif mode == "gpu":
        attach_workflows(worker, [gpu_work], [render, train], local_dispatch=True)
    elif mode == "fair":
        worker.register("fair", fair, limits=[ConcurrencyLimit("fair", 2, per_key=True)])
    else:
        worker.register("rated", rated, limits=[RateLimit("rated", 5, timedelta(seconds=1))])
    async with worker:
        while not await _finished(mode, expected):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    await STORE.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
