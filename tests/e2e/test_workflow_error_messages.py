"""Errors a client sees say what happened once, clearly."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import ActivityError, WorkflowCancelledError, WorkflowFailedError
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@activity(
    name="em_slow",
    start_to_close=timedelta(seconds=0.2),
    retry=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=1), jitter=0),
)
async def slow(n: int) -> int:
    await asyncio.sleep(2)
    return n


@workflow(name="em_boom")
async def boom(ctx: WorkflowContext, n: int) -> int:
    raise ValueError(f"boom {n}")


@workflow(name="em_wait")
async def wait(ctx: WorkflowContext, n: int) -> int:
    await ctx.wait_signal("never")
    return n


@workflow(name="em_slow_wf")
async def slow_wf(ctx: WorkflowContext, n: int) -> str:
    try:
        await slow(n)
    except ActivityError as err:
        return f"{err.error_type}|{err.message}"
    return "no timeout"


def _runtime(store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry([boom, wait, slow_wf], [slow]))


async def test_failed_workflow_error_names_the_cause_once(store: PostgresStore) -> None:
    handle = await Client(store).start(boom, 7)
    await _runtime(store).run_until_idle()
    with pytest.raises(WorkflowFailedError) as caught:
        await handle.result(timeout=5)
    err = caught.value
    assert (err.error_type, err.message) == ("ValueError", "boom 7")
    text = str(err)
    assert text == f"[workflow_failed] workflow {handle.id} failed: ValueError: boom 7"
    assert (await handle.describe()).failure_reason == "ValueError: boom 7"


async def test_cancelled_workflow_error_says_cancelled_once(store: PostgresStore) -> None:
    handle = await Client(store).start(wait, 1)
    runtime = _runtime(store)
    await runtime.run_until_idle()
    await handle.cancel()
    await runtime.run_until_idle()
    with pytest.raises(WorkflowCancelledError) as caught:
        await handle.result(timeout=5)
    text = str(caught.value)
    assert text.count("cancelled") == 2  # the code, then the sentence
    assert text.startswith(f"[workflow_cancelled] workflow {handle.id} was cancelled: ")


async def test_start_to_close_timeout_names_activity_limit_and_attempt(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(slow_wf, 3)
    runtime = _runtime(store)
    for _ in range(50):
        await runtime.run_until_idle()
        if (await handle.describe()).state != "running":
            break
        await asyncio.sleep(0.05)
    got = await handle.result(timeout=5)
    assert got == "TimeoutError|activity em_slow exceeded start_to_close=0.2s (attempt 2)"
