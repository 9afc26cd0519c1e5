"""A worker process frozen (SIGSTOP) inside a non-idempotent call that declares
``heartbeat_timeout``: its lease is the heartbeat timeout, not the worker's
30 s lease, so another worker's reaper parks the call as uncertain and suspends
the run within seconds — never re-running it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from azync_flow import attach_workflows
from azync_flow.client import Client, WorkflowHandle
from azync_flow.runtime.worker_runtime import WORKFLOW_LEADERSHIP
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import Worker

from . import _heartbeat_freeze_app as app

ROOT = Path(__file__).resolve().parents[2]


async def _frozen_worker(dsn: str, schema: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "AZYNC_DSN": dsn, "AZYNC_SCHEMA": schema, "PYTHONPATH": str(ROOT)}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "azync_flow.cli",
        "worker",
        "tests.chaos._heartbeat_freeze_app",
        "--lease",
        "30",
        "--log-level",
        "ERROR",
        env=env,
        cwd=str(ROOT),
    )


async def _wait_for(check: Callable[[], Awaitable[bool]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached within {seconds}s")


async def test_a_frozen_worker_loses_a_silent_call_to_the_reaper_within_the_timeout(
    pg_dsn: str, store: PostgresStore
) -> None:
    await store.pool.execute(app.CALLS_DDL)
    # This worker leads maintenance (the reaper) and runs no activity itself.
    leader = Worker(
        store,
        maintenance_interval=timedelta(milliseconds=100),
        poll_interval=timedelta(milliseconds=50),
        handle_signals=False,
    )
    attach_workflows(leader, [app.wire], [])
    handle = await Client(store).start(app.wire, 10)
    async with leader:
        await _wait_for(_is_leader(leader), 10)
        proc = await _frozen_worker(pg_dsn, store.schema)
        try:
            await _wait_for(lambda: _calls_are(store, 1), 20)
            proc.send_signal(signal.SIGSTOP)  # the whole process hangs mid-call
            frozen_at = time.monotonic()
            await _wait_for(lambda: _suspended(handle), 10)
            parked_after = time.monotonic() - frozen_at
        finally:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 20) == 0
    assert parked_after < 10  # the heartbeat timeout, not the 30 s worker lease
    (op,) = await Client(store).list_uncertain(handle.id)
    assert op.activity == "transfer"
    assert "lease expired" in op.reason
    row = await store.pool.fetchrow(
        "SELECT state, attempt FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'",
        handle.id,
    )
    assert (row["state"], row["attempt"]) == ("uncertain", 1)
    assert await store.pool.fetchval("SELECT count(*) FROM transfer_calls") == 1  # never re-run
    assert (await handle.describe()).state == WorkflowState.SUSPENDED


def _is_leader(worker: Worker) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return worker.maintenance.is_leader(WORKFLOW_LEADERSHIP)

    return check


async def _calls_are(store: PostgresStore, n: int) -> bool:
    return bool(await store.pool.fetchval("SELECT count(*) FROM transfer_calls") == n)


async def _suspended(handle: WorkflowHandle[Any]) -> bool:
    return (await handle.describe()).state == WorkflowState.SUSPENDED
