"""A worker SIGKILLed mid-activity or mid-pass of a fan-out workflow; the
run recovers on a new worker, each operation has one job row per task key."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path

import asyncpg
import pytest

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_fan_out_kill_app.py")
_spec = importlib.util.spec_from_file_location("_fan_out_kill_app", APP)
assert _spec is not None
assert _spec.loader is not None
MOD = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MOD)


async def _worker(pg_dsn: str, schema: str, run_id: object, mode: str, ledger: Path) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        str(run_id),
        mode,
        str(ledger),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return await asyncio.wait_for(proc.wait(), 60)


@pytest.mark.parametrize("mode", ["during", "in_pass:2", "after_pass:1", "after_pass:2"])
async def test_a_killed_fan_out_recovers_with_one_job_per_operation(
    store: PostgresStore, pg_dsn: str, tmp_path: Path, mode: str
) -> None:
    ledger = tmp_path / "ledger"
    ledger.write_text("")
    h = await Client(store).start(MOD.fan, 6)
    assert await _worker(pg_dsn, store.schema, h.id, mode, ledger) == -signal.SIGKILL
    assert await _worker(pg_dsn, store.schema, h.id, "", ledger) == 0
    want = [v for r in range(3) for v in [*(r * 100 + i for i in range(6)), r * 10, -r]]
    assert await h.result(timeout=10) == want
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch(
            f"SELECT task_key, count(*) AS n, array_agg(state) AS st"
            f' FROM "{store.schema}".azync_jobs'
            f" WHERE run_id = $1 AND task_key <> '$wft' GROUP BY task_key",
            h.id,
        )
    finally:
        await conn.close()
    assert len(rows) == 24
    assert [dict(r) for r in rows if r["n"] != 1 or r["st"] != ["succeeded"]] == []
