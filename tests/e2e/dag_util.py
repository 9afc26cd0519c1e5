"""Shared pieces of the DAG end-to-end tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

from opentelemetry.trace import TracerProvider

from azync_flow.dag import DAG, DAGRunner, DAGScheduler, RetryPolicy, run_until_settled
from azync_flow.store.dags import DAGView
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState

FAST = RetryPolicy(initial_interval=timedelta(0), jitter=0.0)


def runner(store: PostgresStore, *dags: DAG, **kw: object) -> DAGRunner:
    return DAGRunner(store, dags, retry=FAST, **kw)  # type: ignore[arg-type]


async def settle(
    store: PostgresStore,
    run: DAGRunner,
    run_id: uuid.UUID,
    *,
    tracer_provider: TracerProvider | None = None,
    **kw: object,
) -> DAGView:
    scheduler = DAGScheduler(store, tracer_provider=tracer_provider)
    return await run_until_settled(store, run, run_id, scheduler=scheduler, **kw)  # type: ignore[arg-type]


async def task_states(store: PostgresStore, run_id: uuid.UUID) -> dict[str, JobState]:
    return {j.task_key: j.state for j in await store.dag_tasks(run_id)}


async def eventually(pred: Callable[[], Awaitable[bool]], seconds: float = 20.0) -> float:
    """Poll ``pred`` every 10 ms until it holds; return the seconds it took."""
    t0 = time.monotonic()
    for _ in range(int(seconds / 0.01)):
        if await pred():
            return time.monotonic() - t0
        await asyncio.sleep(0.01)
    raise AssertionError(f"condition not met within {seconds}s")
