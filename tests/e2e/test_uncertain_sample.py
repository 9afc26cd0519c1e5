"""samples/payment_uncertain.py runs end to end: killed mid-charge, suspended,
reconciled from code by the provider lookup, completed with exactly one charge."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def test_payment_sample_completes_after_a_kill_without_a_second_charge(
    pg_dsn: str,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "samples" / "payment_uncertain.py"),
        env={**os.environ, "AZYNC_DSN": pg_dsn, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert "killed mid-charge (exit -9); provider charges: 1" in text
    assert "run is suspended" in text
    assert "uncertain: charge_card of payment" in text
    assert "decided 1 operation(s): ['complete']" in text
    assert "run succeeded" in text
    assert text.rstrip().splitlines()[-2].endswith("provider charges: 1")
    assert text.rstrip().endswith(
        "ActivityScheduled -> OperationUncertain -> OperationResolved -> ActivityCompleted"
        " -> WorkflowCompleted"
    )
