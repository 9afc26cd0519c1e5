"""The stalled-execution view: running executions with nothing pending are
listed (a lost task or operation never leaves a run silently stuck), while a
run that sleeps on a timer or waits for a signal is healthy and not listed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow import WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime


@activity(name="stall_quote")
async def stall_quote(n: int) -> int:
    return n


@workflow(name="stall_sleeper")
async def stall_sleeper(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(hours=1))
    return n


@workflow(name="stall_waiter")
async def stall_waiter(ctx: WorkflowContext, n: int) -> int:
    value: int = await ctx.wait_signal("go")
    return value + n


@workflow(name="stall_quoter")
async def stall_quoter(ctx: WorkflowContext, n: int) -> int:
    return await stall_quote(n)


async def _delete_jobs(store: PostgresStore, run_id: uuid.UUID, task: bool) -> None:
    """Lose a run's workflow task (or its operation) the way a bad manual fix would."""
    op = "=" if task else "<>"
    deleted = await store.pool.execute(
        f"DELETE FROM azync_jobs WHERE run_id = $1 AND task_key {op} '$wft' "
        "AND state IN ('pending', 'scheduled', 'active')",
        run_id,
    )
    assert deleted != "DELETE 0"


async def test_runs_with_nothing_pending_are_listed_and_sleeping_or_waiting_runs_are_not(
    store: PostgresStore,
) -> None:
    client = Client(store)
    sleeper = await client.start(stall_sleeper, 1)
    waiter = await client.start(stall_waiter, 2)
    quoter = await client.start(stall_quoter, 3)
    never_ran = await client.start(stall_waiter, 4)
    signalled = await client.start(stall_waiter, 5)
    await _delete_jobs(store, never_ran.id, task=True)  # lost before its first pass

    # The quote activity is not registered: its operation stays pending.
    runtime = LocalRuntime(store, Registry([stall_sleeper, stall_waiter, stall_quoter], []))
    await runtime.run_until_idle()
    assert [s.id for s in await client.list_stalled()] == [never_ran.id]

    await _delete_jobs(store, quoter.id, task=False)  # its operation is lost
    assert await signalled.signal("go", 10)
    await _delete_jobs(store, signalled.id, task=True)  # the signal's task is lost

    stalled = await client.list_stalled()
    assert {s.id for s in stalled} == {never_ran.id, quoter.id, signalled.id}
    assert {s.name for s in stalled} == {"stall_waiter", "stall_quoter"}
    assert all(s.updated_at is not None for s in stalled)
    assert sleeper.id not in {s.id for s in stalled}
    assert waiter.id not in {s.id for s in stalled}
    assert await client.list_stalled(timedelta(hours=1)) == []  # none is that old
    assert len(await client.list_stalled(limit=1)) == 1


async def test_a_waiting_run_leaves_the_view_once_its_signal_is_processed(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handle = await client.start(stall_waiter, 1)
    runtime = LocalRuntime(store, Registry([stall_waiter], []))
    await runtime.run_until_idle()
    assert await client.list_stalled() == []
    await handle.signal("go", 41)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 42
    assert await client.list_stalled() == []


async def test_list_stalled_rejects_a_bad_limit_or_age(store: PostgresStore) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match="limit"):
        await client.list_stalled(limit=0)
    with pytest.raises(ValueError, match="older_than"):
        await client.list_stalled(timedelta(seconds=-1))
