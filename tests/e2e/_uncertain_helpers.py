"""Shared pieces of the uncertain-operation end-to-end tests."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from azync_flow.cli import main
from azync_flow.runtime.worker_runtime import WORKFLOW_TASK_KIND
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime


def local_runtime(
    store: PostgresStore,
    workflows: list[Any],
    activities: list[Any],
    lease: timedelta = timedelta(seconds=30),
) -> LocalRuntime:
    return LocalRuntime(store, Registry(workflows, activities), lease=lease, cache_size=0)


async def silent_worker_until_idle(runtime: LocalRuntime, lease: timedelta) -> int:
    """A worker cut off from PostgreSQL mid-call: it leases and runs workflow tasks
    and activity attempts with ``runtime``'s runners but never renews a lease (no
    heartbeat reaches the database), so a long call's lease really expires.
    Runs rounds until one leases nothing; returns the jobs run."""
    store: Any = runtime.store
    total = 0
    while True:
        await store.promote_workflow_jobs()
        tasks = [t.job for t in await store.lease_workflow_tasks(10, lease, WORKFLOW_TASK_KIND)]
        await asyncio.gather(*(runtime.workflows.run_task(j, j.lease_token) for j in tasks))
        ran = len(tasks)
        for kind in runtime.registry.activities:
            jobs = await store.dequeue_batch(
                Source.WORKFLOW, DequeueParams(kind=kind, limit=10, lease=lease)
            )
            await asyncio.gather(
                *(runtime.activities.run_operation(j, j.lease_token) for j in jobs)
            )
            ran += len(jobs)
        if ran == 0:
            return total
        total += ran


def event_types(history: list[Any]) -> list[str]:
    return [type(e.event).__name__ for e in history]


async def op_row(store: PostgresStore, op_id: uuid.UUID) -> Any:
    return await store.pool.fetchrow("SELECT * FROM azync_jobs WHERE id = $1", op_id)


async def op_audit(store: PostgresStore, op_id: uuid.UUID) -> list[tuple[int, str]]:
    rows = await store.pool.fetch(
        "SELECT attempt, error FROM azync_job_attempts WHERE job_id = $1 ORDER BY id", op_id
    )
    return [(r["attempt"], r["error"]) for r in rows]


async def ledger(store: PostgresStore, type_: str) -> list[Any]:
    return await store.pool.fetch(
        "SELECT payload, meta, aggregate_id FROM azync_events WHERE type = $1", type_
    )


async def snapshot(store: PostgresStore, wid: uuid.UUID) -> Any:
    jobs = await store.pool.fetch(
        "SELECT id, state, attempt, decision, decision_by, result, lease_token"
        " FROM azync_jobs WHERE run_id = $1 ORDER BY id",
        wid,
    )
    history = await store.pool.fetch(
        "SELECT seq, type, payload FROM azync_workflow_history WHERE workflow_id = $1 ORDER BY seq",
        wid,
    )
    ex = await store.pool.fetchrow(
        "SELECT state, suspend_reason FROM azync_workflow_executions WHERE id = $1", wid
    )
    return [tuple(r) for r in jobs], [tuple(r) for r in history], tuple(ex)


async def cli(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    """Run the CLI in a thread against ``store``; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, [*argv, "--dsn", pg_dsn, "--schema", store.schema])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def resolve_argv(op_id: uuid.UUID, result: str) -> list[str]:
    """``uncertain resolve`` argv of a complete decision with ``result`` (JSON text)."""
    return [
        "uncertain", "resolve", str(op_id), "--decision", "complete",
        "--result", result, "--note", "provider dashboard", "--by", "ann",
    ]  # fmt: skip
