"""Worker process for the workflow chaos tests: a real Worker with the workflow
runtime, short leases, and named fault-injection points that SIGKILL the process.

    python _workflow_kill_app.py DSN SCHEMA RUN_ID

Environment:
    KILL_LEDGER   file the activities append ``<event>:<step>:<order>`` lines to
    KILL_MODE     ""                    no fault
                  "after:<activity>"    right after the activity's completion committed
                  "during:<activity>"   inside the activity body, after it started
                  "stall:<activity>"    inside the activity body, a 4 s call (the
                                        test freezes the process meanwhile)
                  "in_pass:<n>"         in the n-th workflow pass, before its commit
                  "after_pass:<n>"      right after the n-th pass committed
                  "stall_pass:<n>"      the n-th pass (any path) blocks its process for 4 s
                                        before its commit (a long pass; the test freezes it)
                  "sleeping:<n>"        after the n-th pass (any path) committed and its span
                                        ended,
                                        e.g. while the workflow waits on ctx.sleep
                                        (passes counted on every path: a leased
                                        workflow task, one folded into an
                                        activity's completion, an eager start)
                  "before_settle:<activity>"  the activity returned; its outcome
                                        is not committed yet
    LOCAL_DISPATCH  "0" turns local dispatch off (every pass carried by a task)
    EAGER_START   "<workflow>:<input>": start RUN_ID from this process with its
                  first pass (eager start) once the worker runs
    UNTIL         "done" (default: wait for the run's result) or "suspended"
    OTLP_ENDPOINT export spans there (service name WORKER_NAME); flushed before a kill
    CACHE_SIZE    sticky-cache size (0 = full replay on every pass)
    LEASE_S       lease per attempt in seconds (default 1.5)
    WORKER_IDENTITY  the worker's identity (default: the first free "<host>/<n>")
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.workflows import WorkflowStartParams, WorkflowState
from azync_flow.worker import Worker

LEDGER = Path(os.environ.get("KILL_LEDGER", "/tmp/ledger"))
MODE = os.environ.get("KILL_MODE", "")
PROVIDER: Any = None


def die() -> None:
    if PROVIDER is not None:
        PROVIDER.force_flush()
    os.kill(os.getpid(), signal.SIGKILL)


def record(event: str, step: str, order_id: str) -> None:
    with LEDGER.open("a") as f:
        f.write(f"{event}:{step}:{order_id}\n")


def step(name: str, order_id: str) -> str:
    record("start", name, order_id)
    if f"during:{name}" == MODE:
        die()
    if f"stall:{name}" == MODE:
        time.sleep(4)
    record("done", name, order_id)
    return f"{name}-done"


@activity(name="reserve")
def reserve(order_id: str) -> str:
    return step("reserve", order_id)


@activity(name="charge")
def charge(order_id: str) -> str:
    return step("charge", order_id)


@activity(name="ship")
def ship(order_id: str) -> str:
    return step("ship", order_id)


@activity(name="wire", idempotent=False)
def wire(order_id: str) -> str:
    return step("wire", order_id)


@workflow(name="killable_order")
async def killable_order(ctx: WorkflowContext, order_id: str) -> list[str]:
    return [await reserve(order_id), await charge(order_id), await ship(order_id)]


@workflow(name="sleepy_order")
async def sleepy_order(ctx: WorkflowContext, order_id: str) -> list[str]:
    first = await reserve(order_id)
    await ctx.sleep(timedelta(seconds=2))
    return [first, await ship(order_id)]


@workflow(name="wire_order")
async def wire_order(ctx: WorkflowContext, order_id: str) -> str:
    return await wire(order_id)


WORKFLOWS = [killable_order, sleepy_order, wire_order]
ACTIVITIES = [reserve, charge, ship, wire]


def install_faults(runtime: Any) -> None:
    def after_settle(job: Any, event_type: str) -> None:
        if f"after:{job.meta.get('activity')}" == MODE:
            die()

    def before_settle(job: Any, event_type: str) -> None:
        if f"before_settle:{job.meta.get('activity')}" == MODE:
            die()

    runtime.activities.after_settle = after_settle
    runtime.activities.before_settle = before_settle
    if not MODE.startswith(("in_pass:", "after_pass:", "sleeping:", "stall_pass:")):
        return
    where, n = MODE.split(":")
    passes = 0

    def before_commit(run_id: Any, path: str) -> None:
        nonlocal passes
        passes += 1
        if where == "in_pass" and passes == int(n):
            die()
        if where == "stall_pass" and passes == int(n):
            record("stall", "pass", n)
            time.sleep(4)

    def after_commit(run_id: Any, path: str) -> None:
        if where in ("after_pass", "sleeping") and passes == int(n):
            die()

    runtime.workflows.before_commit = before_commit
    runtime.workflows.after_commit = after_commit


async def main(dsn: str, schema: str, run_id: str) -> None:
    global PROVIDER
    if os.environ.get("OTLP_ENDPOINT"):
        from azync_flow.otlp import configure_otlp

        PROVIDER = configure_otlp(
            service_name=os.environ.get("WORKER_NAME", "worker"),
            endpoint=os.environ["OTLP_ENDPOINT"],
        )
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    worker = Worker(
        store,
        lease=timedelta(seconds=float(os.environ.get("LEASE_S", "1.5"))),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        # a frozen leader is replaced within ~2 s, well inside the 30 s result wait
        leader_ttl=timedelta(seconds=2),
        maintain=(),
        handle_signals=False,
        identity=os.environ.get("WORKER_IDENTITY") or None,
    )
    runtime = attach_workflows(
        worker,
        WORKFLOWS,
        ACTIVITIES,
        cache_size=int(os.environ.get("CACHE_SIZE", "1000")),
        local_dispatch=os.environ.get("LOCAL_DISPATCH", "1") != "0",
    )
    install_faults(runtime)
    handle = Client(store).get_handle(uuid.UUID(run_id))
    async with worker:
        if os.environ.get("EAGER_START"):
            name, value = os.environ["EAGER_START"].split(":", 1)
            params = WorkflowStartParams(
                id=uuid.UUID(run_id), name=name, input=msgspec.json.encode(value)
            )
            started = await runtime.eager.start(params)
            assert started.inserted
            assert started.commit is not None
        if os.environ.get("UNTIL", "done") == "suspended":
            while (await handle.describe()).state != WorkflowState.SUSPENDED:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        else:
            await handle.result(timeout=30)
    if PROVIDER is not None:
        PROVIDER.force_flush()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
