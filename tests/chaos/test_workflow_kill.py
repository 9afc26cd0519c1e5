"""SIGKILL of a worker between activities: the run completes on a new worker and
every completed activity ran exactly once."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.types import WorkflowState

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_workflow_kill_app.py")


async def run_worker(pg_dsn: str, schema: str, ledger: Path, kill_after: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        kill_after,
        env={**os.environ, "KILL_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)},
    )
    return await asyncio.wait_for(proc.wait(), 60)


async def test_sigkill_after_charge_then_new_worker_completes_each_step_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("_workflow_kill_app", APP)
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    killable_order = app.killable_order
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(killable_order, "o-7")
    code = await run_worker(pg_dsn, schema, ledger, kill_after="charge")
    assert code == -signal.SIGKILL
    assert ledger.read_text().splitlines() == ["reserve:o-7", "charge:o-7"]
    assert (await handle.describe()).state == WorkflowState.RUNNING
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types[-1] == "ActivityCompleted"  # charge's completion survived the kill
    assert await run_worker(pg_dsn, schema, ledger, kill_after="") == 0
    assert await handle.result(timeout=10) == ["reserve-done", "charge-done", "ship-done"]
    assert ledger.read_text().splitlines() == ["reserve:o-7", "charge:o-7", "ship:o-7"]
