"""Shared pieces of the DAG end-to-end tests."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azync_flow.dag import DAG, DAGRunner, DAGScheduler, RetryPolicy, run_until_settled
from azync_flow.store import DAGView, JobState
from azync_flow.store.postgres import PostgresStore

FAST = RetryPolicy(initial=timedelta(0))


def runner(store: PostgresStore, *dags: DAG, **kw: object) -> DAGRunner:
    return DAGRunner(store, dags, retry=FAST, **kw)  # type: ignore[arg-type]


async def settle(store: PostgresStore, run: DAGRunner, run_id: uuid.UUID, **kw: object) -> DAGView:
    return await run_until_settled(store, run, run_id, scheduler=DAGScheduler(store), **kw)  # type: ignore[arg-type]


async def task_states(store: PostgresStore, run_id: uuid.UUID) -> dict[str, JobState]:
    return {j.task_key: j.state for j in await store.dag_tasks(run_id)}
