"""Cancelling a SUSPENDED execution ends it (its code cannot run, so the store
settles it cancelled directly, without cleanup code)."""

from __future__ import annotations

import asyncio
import time

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import NotFoundError, Uncertain, WorkflowCancelledError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

CALLS: list[str] = []


@activity(name="sc_step")
def step(tag: str) -> str:
    CALLS.append(tag)
    return tag


@activity(name="sc_other")
def other(tag: str) -> str:
    CALLS.append("other:" + tag)
    return tag


async def test_cancel_of_a_run_suspended_by_nondeterminism_ends_it_cancelled(
    store: PostgresStore,
) -> None:
    CALLS.clear()

    @workflow(name="sc_evolving")
    async def v1(ctx: WorkflowContext, tag: str) -> str:
        await step(tag)
        await ctx.wait_signal("go")
        return await step(tag + "-done")

    @workflow(name="sc_evolving")
    async def v2(ctx: WorkflowContext, tag: str) -> str:
        try:
            await other(tag)  # reordered: non-deterministic against v1's history
            await ctx.wait_signal("go")
            return await step(tag + "-done")
        finally:
            CALLS.append("cleanup")

    client = Client(store)
    handle = await client.start(v1, "n1")
    await LocalRuntime(store, Registry([v1], [step, other])).run_until_idle()
    await handle.signal("go")
    v2_runtime = LocalRuntime(store, Registry([v2], [step, other]))
    await v2_runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    CALLS.clear()
    # result() keeps waiting through a suspension (it may resume): a timeout says so
    with pytest.raises(TimeoutError, match="still suspended"):
        await handle.result(timeout=0.3)

    waiter = asyncio.create_task(handle.result(timeout=30))
    await asyncio.sleep(0.2)  # the waiter is parked on its LISTEN wake-up
    started = time.monotonic()
    await handle.cancel()
    with pytest.raises(WorkflowCancelledError) as caught:
        await waiter
    assert time.monotonic() - started < 5
    assert "suspended" in str(caught.value)

    view = await handle.describe()
    assert view.state == WorkflowState.CANCELLED
    assert view.completed_at is not None
    assert "suspended" in view.failure_reason
    # nothing is left to run, and running workers do not run its code
    live = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE run_id = $1"
        " AND state IN ('pending', 'scheduled', 'active', 'uncertain')",
        handle.id,
    )
    assert live == 0
    await v2_runtime.run_until_idle()
    assert CALLS == []  # no cleanup code ran, no activity ran
    with pytest.raises(NotFoundError):
        await handle.cancel()  # already terminal


async def test_cancel_of_a_run_suspended_on_an_uncertain_operation_cancels_the_operation(
    store: PostgresStore,
) -> None:
    @activity(name="sc_wire", idempotent=False)
    def wire(amount: int) -> str:
        raise Uncertain("bank timed out after the request was sent")

    @workflow(name="sc_payout")
    async def payout(ctx: WorkflowContext, amount: int) -> str:
        return await wire(amount)

    runtime = LocalRuntime(store, Registry([payout], [wire]))
    client = Client(store)
    handle = await client.start(payout, 70)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    [op] = await client.list_uncertain(handle.id)

    await handle.cancel()
    with pytest.raises(WorkflowCancelledError):
        await handle.result(timeout=5)
    row = await store.pool.fetchrow(
        "SELECT state, uncertain_reason, completed_at FROM azync_jobs WHERE id = $1",
        op.operation_id,
    )
    assert row["state"] == "cancelled"
    assert "bank timed out" in row["uncertain_reason"]  # the audit trail stays
    assert row["completed_at"] is not None
    assert await client.list_uncertain(handle.id) == []
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.CANCELLED
