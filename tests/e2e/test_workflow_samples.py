"""The README's main command: samples/quickstart.py runs an order to completion."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from azync_flow.testing import drop_schema, unique_schema

ROOT = Path(__file__).resolve().parents[2]


async def test_quickstart_prints_a_shipped_order_and_its_history(pg_dsn: str) -> None:
    schema = unique_schema("qs")
    env = {**os.environ, "AZYNC_DSN": pg_dsn, "AZYNC_SCHEMA": schema, "PYTHONPATH": str(ROOT)}
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "samples" / "quickstart.py"),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        await drop_schema(pg_dsn, schema)
    stdout = out.decode()
    assert proc.returncode == 0, err.decode()
    assert "status='shipped'" in stdout
    assert "approved_by='quickstart'" in stdout
    assert "SignalReceived(approve" in stdout
    assert stdout.rstrip().endswith("WorkflowCompleted")
