"""Worker process for the child-workflow / continue-as-new chaos tests: a real
Worker with the workflow runtime, short leases, and a SIGKILL of the process
around the n-th workflow pass commit.

    python _children_kill_app.py DSN SCHEMA RUN_ID

Environment:
    KILL_LEDGER   file the activities append ``done:<step>`` lines to
    KILL_MODE     ""                 no fault
                  "in_pass:<n>"      in the n-th pass (any execution), before its commit
                  "after_pass:<n>"   right after the n-th pass committed
    CACHE_SIZE    sticky-cache size (0 = full replay on every pass)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker

LEDGER = Path(os.environ.get("KILL_LEDGER", "/tmp/ledger"))
MODE = os.environ.get("KILL_MODE", "")


@activity(name="work")
def work(label: str) -> str:
    with LEDGER.open("a") as f:
        f.write(f"done:{label}\n")
    return f"{label}-done"


@workflow(name="kid_task")
async def kid_task(ctx: WorkflowContext, label: str) -> str:
    return await work(label)


@workflow(name="two_kids")
async def two_kids(ctx: WorkflowContext, order: str) -> list[str]:
    pay = await ctx.start_child(kid_task, f"pay-{order}")
    ship = await ctx.start_child(kid_task, f"ship-{order}")
    return list(await asyncio.gather(pay.result(), ship.result()))


@workflow(name="drain")
async def drain(ctx: WorkflowContext, got: list[str]) -> list[str]:
    """One signal per run; every run continues as new until 'stop'."""
    value = await ctx.wait_signal("item")
    got = [*got, value]
    if value == "stop":
        return got
    ctx.continue_as_new(got)


WORKFLOWS = [kid_task, two_kids, drain]


def install_faults(runtime: Any) -> None:
    if not MODE:
        return
    where, n = MODE.split(":")
    passes = 0

    def before_commit(run_id: Any, path: str) -> None:
        nonlocal passes
        passes += 1
        if where == "in_pass" and passes == int(n):
            os.kill(os.getpid(), signal.SIGKILL)

    def after_commit(run_id: Any, path: str) -> None:
        if where == "after_pass" and passes == int(n):
            os.kill(os.getpid(), signal.SIGKILL)

    runtime.workflows.before_commit = before_commit
    runtime.workflows.after_commit = after_commit


async def main(dsn: str, schema: str, run_id: str) -> None:
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
    runtime = attach_workflows(
        worker, WORKFLOWS, [work], cache_size=int(os.environ.get("CACHE_SIZE", "1000"))
    )
    install_faults(runtime)
    async with worker:
        await Client(store).get_handle(uuid.UUID(run_id)).result(timeout=30)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
