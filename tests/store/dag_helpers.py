"""Helpers for the DAG store tests: build params, lease and settle tasks by key."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azync_flow.store.dags import (
    KIND_SIGNAL,
    KIND_SLEEP,
    DAGDep,
    DAGParams,
    DAGTask,
    OnFailurePolicy,
)
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Job, JobState

LEASE = timedelta(seconds=30)


def task(key: str, kind: str | None = None, **kw: object) -> DAGTask:
    """A handler task whose kind defaults to ``k:<key>``."""
    return DAGTask(key=key, kind=kind or f"k:{key}", **kw)  # type: ignore[arg-type]


def sleep(key: str, seconds: float, signal: str = "") -> DAGTask:
    return DAGTask(
        key=key, kind=KIND_SLEEP, sleep_for=timedelta(seconds=seconds), signal_name=signal
    )


def signal(key: str, name: str | None = None) -> DAGTask:
    return DAGTask(key=key, kind=KIND_SIGNAL, signal_name=name or key)


def params(
    tasks: list[DAGTask],
    edges: list[tuple[str, str]] = (),  # type: ignore[assignment]
    *,
    name: str = "d",
    on_failure: OnFailurePolicy = OnFailurePolicy.CANCEL,
    key: str = "",
    meta: dict[str, str] | None = None,
) -> DAGParams:
    """DAG params; ``edges`` are ``(task, depends_on)`` pairs."""
    return DAGParams(
        id=uuid.uuid4(),
        name=name,
        on_failure=on_failure,
        idempotency_key=key,
        meta=meta or {},
        tasks=tasks,
        deps=[DAGDep(task_key=t, depends_on_key=d) for t, d in edges],
    )


async def create(store: PostgresStore, p: DAGParams) -> uuid.UUID:
    inserted, _ = await store.create_dag(p)
    assert inserted
    return p.id


async def states(store: PostgresStore, dag_id: uuid.UUID) -> dict[str, JobState]:
    return {j.task_key: j.state for j in await store.dag_tasks(dag_id)}


async def tasks_by_key(store: PostgresStore, dag_id: uuid.UUID) -> dict[str, Job]:
    return {j.task_key: j for j in await store.dag_tasks(dag_id)}


async def lease(store: PostgresStore, dag_id: uuid.UUID, key: str) -> Job:
    """Lease the pending task ``key`` of ``dag_id`` (it must be pending and due)."""
    t = (await tasks_by_key(store, dag_id))[key]
    jobs = await store.dag_dequeue([t.kind], 100, LEASE)
    mine = [j for j in jobs if j.id == t.id]
    for j in jobs:
        if j.id != t.id:
            await store.release(j.id, j.lease_token)  # type: ignore[arg-type]
    assert mine, f"task {key} was not leasable (state {t.state})"
    return mine[0]


async def succeed(
    store: PostgresStore, dag_id: uuid.UUID, key: str, result: bytes | None = None
) -> Job:
    j = await lease(store, dag_id, key)
    await store.ack_task_result(j.id, j.lease_token, result)  # type: ignore[arg-type]
    return j


async def kill(store: PostgresStore, dag_id: uuid.UUID, key: str, error: str = "boom") -> Job:
    j = await lease(store, dag_id, key)
    await store.dead(j.id, j.lease_token, error)  # type: ignore[arg-type]
    return j


async def skip(store: PostgresStore, dag_id: uuid.UUID, key: str, reason: str = "nah") -> Job:
    j = await lease(store, dag_id, key)
    await store.skip(j.id, j.lease_token, reason)  # type: ignore[arg-type]
    return j
