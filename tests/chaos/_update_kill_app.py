"""Worker process for the update chaos test: a real Worker whose update handler
runs an activity that SIGKILLs the process on its first attempt.

    python _update_kill_app.py DSN SCHEMA RUN_ID UPDATE_ID

Environment:
    KILL_LEDGER   file the activity appends ``start:<n>`` / ``done:<n>`` lines to
    KILL_MODE     "during:charge" kills the process inside the activity; "" runs clean
    CACHE_SIZE    sticky-cache size (0 = full replay on every pass)

Exits 0 once the update has an outcome.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker

LEDGER = Path(os.environ.get("KILL_LEDGER", "/tmp/ledger"))
MODE = os.environ.get("KILL_MODE", "")


@activity(name="charge")
def charge(amount: int) -> int:
    with LEDGER.open("a") as f:
        f.write(f"start:{amount}\n")
    if MODE == "during:charge":
        os.kill(os.getpid(), signal.SIGKILL)
    with LEDGER.open("a") as f:
        f.write(f"done:{amount}\n")
    return amount * 100


@workflow(name="tab")
async def tab(ctx: WorkflowContext) -> int:
    total = 0

    @ctx.update()
    async def pay(amount: int) -> int:
        nonlocal total
        total += await charge(amount)
        return total

    await ctx.wait_signal("close")
    return total


async def main(dsn: str, schema: str, run_id: str, update_id: str) -> None:
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    worker = Worker(
        store,
        lease=timedelta(seconds=1.5),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        leader_ttl=timedelta(seconds=2),
        maintain=(),
        handle_signals=False,
    )
    attach_workflows(worker, [tab], [charge], cache_size=int(os.environ.get("CACHE_SIZE", "1000")))
    async with worker:
        while await store.get_workflow_update(uuid.UUID(run_id), update_id) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
