"""Fan-out kill app: python _fan_out_kill_app.py DSN SCHEMA RUN_ID MODE LEDGER
MODE: "" | "during" (SIGKILL inside activity 'victim' on its first attempt) |
      "in_pass:<n>" (SIGKILL before the n-th pass commits) |
      "after_pass:<n>" (right after the n-th pass commits)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from azync_flow import ConcurrencyLimit, WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker

MODE = ""
LEDGER = Path("/tmp/none")


def rec(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\n")


@activity(name="leaf")
def leaf(i: int) -> int:
    rec(f"leaf:{i}")
    return i


@activity(
    name="kleaf",
    limits=[ConcurrencyLimit("fan-leaf", 2, per_key=True)],
    limit_key=lambda k, i: k,
)
def kleaf(k: str, i: int) -> int:
    rec(f"kleaf:{i}")
    return i * 10


@activity(name="victim")
def victim(i: int) -> int:
    rec(f"victim-start:{i}")
    if MODE == "during" and LEDGER.read_text().count("victim-start") == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    rec(f"victim:{i}")
    return -i


@workflow(name="fan")
async def fan(ctx: WorkflowContext, n: int) -> list[int]:
    out: list[int] = []
    for r in range(3):
        calls = [leaf(r * 100 + i) for i in range(n)] + [kleaf("a", r), victim(r)]
        out.extend(await asyncio.gather(*calls))
    return out


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
    runtime = attach_workflows(worker, [fan], [leaf, kleaf, victim], cache_size=0)
    passes = 0
    if MODE.startswith(("in_pass:", "after_pass:")):
        where, n = MODE.split(":")

        def before_commit(run_id: object, path: str) -> None:
            nonlocal passes
            passes += 1
            if where == "in_pass" and passes == int(n):
                os.kill(os.getpid(), signal.SIGKILL)

        def after_commit(run_id: object, path: str) -> None:
            if where == "after_pass" and passes >= int(n):
                os.kill(os.getpid(), signal.SIGKILL)

        runtime.workflows.before_commit = before_commit
        runtime.workflows.after_commit = after_commit
    async with worker:
        await Client(store).get_handle(uuid.UUID(run_id)).result(timeout=40)
    await store.close()


if __name__ == "__main__":
    MODE = sys.argv[4]
    LEDGER = Path(sys.argv[5])
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
