"""A Worker shutting down while a non-idempotent call is in flight parks it as
uncertain instead of releasing it for a blind re-run — real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import Worker

from ._uncertain_helpers import op_row

STARTED: list[str] = []


@activity(name="send_wire", idempotent=False)
async def send_wire(amount: int) -> str:
    STARTED.append("wire")
    await asyncio.sleep(30)  # the bank call is in flight when the worker stops
    return "sent"


@activity(name="slow_lookup")
async def slow_lookup(amount: int) -> str:
    STARTED.append("lookup")
    await asyncio.sleep(30)
    return "found"


@workflow(name="wire_run")
async def wire_run(ctx: WorkflowContext, kind: str) -> str:
    return await (send_wire(5) if kind == "wire" else slow_lookup(5))


async def _stop_mid_call(store: PostgresStore, kind: str) -> tuple[object, object]:
    STARTED.clear()
    worker = Worker(
        store,
        lease=timedelta(seconds=5),
        shutdown_grace=timedelta(milliseconds=100),
        poll_interval=timedelta(milliseconds=50),
        handle_signals=False,
    )
    attach_workflows(worker, [wire_run], [send_wire, slow_lookup])
    handle = await Client(store).start(wire_run, kind)
    async with worker:
        for _ in range(500):
            if STARTED:
                break
            await asyncio.sleep(0.01)
        assert [kind] == STARTED
    op_id = await store.pool.fetchval(
        "SELECT id FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", handle.id
    )
    return handle, await op_row(store, op_id)


async def test_shutdown_mid_call_parks_a_non_idempotent_operation(store: PostgresStore) -> None:
    handle, row = await _stop_mid_call(store, "wire")
    assert row["state"] == "uncertain"  # type: ignore[index]
    assert "cancelled mid-call" in row["uncertain_reason"]  # type: ignore[index]
    assert (await handle.describe()).state == WorkflowState.SUSPENDED  # type: ignore[attr-defined]
    (op,) = await Client(store).list_uncertain()
    assert op.activity == "send_wire"


async def test_shutdown_mid_call_releases_an_idempotent_operation(store: PostgresStore) -> None:
    handle, row = await _stop_mid_call(store, "lookup")
    assert (row["state"], row["attempt"]) == ("pending", 0)  # type: ignore[index]
    assert (await handle.describe()).state == WorkflowState.RUNNING  # type: ignore[attr-defined]
