"""Timeouts survive a SIGKILL of the worker that ran the work: the deadlines are
rows, so another worker enforces them. The killed worker's store clock stands
still (no deadline passes there); the test's clock is moved past them."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

from azync_flow import attach_workflows
from azync_flow.client import Client
from azync_flow.errors import WorkflowTimeoutError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_timeouts_kill_app.py")


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_timeouts_kill_app", APP)
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


APP_MODULE = load_app()


async def test_deadlines_of_a_killed_worker_are_enforced_by_another(
    store: PostgresStore, clock: MovableClock, pg_dsn: str, tmp_path: Path
) -> None:
    t0 = datetime.now(UTC)
    clock.set(t0)
    client = Client(store)
    calling = await client.start(APP_MODULE.calls_hang, 1)
    waiting = await client.start(APP_MODULE.waits, 2, execution_timeout=timedelta(minutes=10))
    ledger = tmp_path / "ledger"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(APP), pg_dsn, store.schema, t0.isoformat(), str(ledger),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            while not (ledger.exists() and "hang started" in ledger.read_text()):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
    op = await store.pool.fetchrow(
        "SELECT state, attempt, close_deadline FROM azync_jobs"
        " WHERE run_id = $1 AND task_key <> '$wft'",
        calling.id,
    )
    assert (op["state"], op["attempt"]) == ("active", 1)  # died holding it
    assert op["close_deadline"] == t0 + timedelta(minutes=10)
    for handle in (calling, waiting):
        assert (await handle.describe()).state == WorkflowState.RUNNING
    clock.set(t0 + timedelta(minutes=11))
    # another worker, which does not even register the activity
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, APP_MODULE.WORKFLOWS, [])
    async with asyncio.timeout(60):
        await worker.run_until_idle()
    assert await calling.result(timeout=5) == "schedule_to_close|ActivityTimeoutError|1"
    with pytest.raises(WorkflowTimeoutError) as caught:
        await waiting.result(timeout=5)
    assert caught.value.kind == "execution"
    assert ledger.read_text().count("hang started") == 1
