"""Worker process for the timeouts chaos test: a real Worker with the workflow
runtime whose store clock stands still, so no deadline ever passes here; the
test SIGKILLs it while it runs an activity.

    python _timeouts_kill_app.py DSN SCHEMA CLOCK_ISO LEDGER

The activity ``tk_hang`` appends ``hang started`` to LEDGER and never returns.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime, timedelta
from pathlib import Path

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.errors import ActivityTimeoutError
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.testing import MovableClock
from azync_flow.worker import Worker

LEDGER = Path("/dev/null")


def _mark(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\n")


@activity(name="tk_hang", schedule_to_close=timedelta(minutes=10))
async def hang(n: int) -> int:
    _mark("hang started")
    await asyncio.Event().wait()
    return n


@workflow(name="tk_calls_hang")
async def calls_hang(ctx: WorkflowContext, n: int) -> str:
    try:
        await hang(n)
    except ActivityTimeoutError as err:
        return f"{err.kind}|{err.error_type}|{err.attempts}"
    return "no timeout"


@workflow(name="tk_waits")
async def waits(ctx: WorkflowContext, n: int) -> int:
    await ctx.wait_signal("never")
    return n


WORKFLOWS = [calls_hang, waits]


async def main(dsn: str, schema: str, clock_at: str, ledger: str) -> None:
    global LEDGER
    LEDGER = Path(ledger)
    clock = MovableClock()
    clock.set(datetime.fromisoformat(clock_at))
    store = await open_store(dsn, Config(schema=schema), migrate=False, clock=clock)
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        maintain=(),
        handle_signals=False,
    )
    attach_workflows(worker, WORKFLOWS, [hang])
    async with worker:
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
