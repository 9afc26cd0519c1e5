"""Worker process for the workflow kill test: runs an order workflow whose
activities append to a ledger file, and SIGKILLs itself right after the charge
step's completion is committed (a named fault-injection point)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from azync_flow import Registry, WorkflowContext, activity, workflow
from azync_flow.runtime import LocalRuntime
from azync_flow.store import Config
from azync_flow.store.postgres import open_store

LEDGER = Path(os.environ.get("KILL_LEDGER", "/tmp/ledger"))


def record(step: str, order_id: str) -> str:
    with LEDGER.open("a") as f:
        f.write(f"{step}:{order_id}\n")
    return f"{step}-done"


@activity(name="reserve")
def reserve(order_id: str) -> str:
    return record("reserve", order_id)


@activity(name="charge")
def charge(order_id: str) -> str:
    return record("charge", order_id)


@activity(name="ship")
def ship(order_id: str) -> str:
    return record("ship", order_id)


@workflow(name="killable_order")
async def killable_order(ctx: WorkflowContext, order_id: str) -> list[str]:
    return [await reserve(order_id), await charge(order_id), await ship(order_id)]


REGISTRY_ARGS: tuple[list[Any], list[Any]] = ([killable_order], [reserve, charge, ship])


async def main(dsn: str, schema: str, kill_after: str) -> None:
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    runtime = LocalRuntime(store, Registry(*REGISTRY_ARGS))

    def fault(job: Any, event_type: str) -> None:
        if kill_after and job.kind == f"$op:{kill_after}@1":
            os.kill(os.getpid(), signal.SIGKILL)

    runtime.activities.after_settle = fault
    await runtime.run_until_idle()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""))
