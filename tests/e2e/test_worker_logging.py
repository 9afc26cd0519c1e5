"""What a worker tells its operator at INFO: what it registered, each retry of
an activity (name, attempt, delay, error), a run suspended and why; and that
the embedded server's chatter is not among it."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from azync_flow import (
    DAG,
    TaskContext,
    Uncertain,
    WorkflowContext,
    activity,
    attach_dags,
    attach_subscribers,
    attach_workflows,
    workflow,
)
from azync_flow.client import Client
from azync_flow.events import subscriber
from azync_flow.retry import RetryPolicy
from azync_flow.runtime.worker_runtime import WORKFLOW_TASK_KIND
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.worker import Worker

FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}
NO_WAIT = RetryPolicy(initial_interval=timedelta(0), jitter=0.0)
calls: dict[str, int] = {}


@activity(name="flaky", retry=NO_WAIT)
async def flaky() -> str:
    calls["flaky"] = calls.get("flaky", 0) + 1
    if calls["flaky"] == 1:
        raise ConnectionError("carrier API reset the connection")
    return "ok"


@activity(name="charge", idempotent=False)
async def charge() -> str:
    raise Uncertain("provider timed out after the request was sent")


@workflow(name="logged")
async def logged(ctx: WorkflowContext, n: int) -> str:
    await flaky()
    return await charge()


pack = DAG("pack")


@pack.task()
async def box(ctx: TaskContext) -> None:
    return None


@subscriber("order.placed", name="auditor")
async def audit(payload: object) -> None:
    return None


async def test_worker_logs_registrations_activity_retries_and_suspensions(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="azync_flow")
    calls.clear()
    worker = Worker(store, **FAST)

    @worker.register("email.send")
    async def send(payload: object) -> None:
        return None

    attach_workflows(worker, [logged], [flaky, charge])
    attach_dags(worker, [pack])
    attach_subscribers(worker, [audit])
    handle = await Client(store).start(logged, 1)
    async with asyncio.timeout(30):
        await worker.run_until_idle()

    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    info = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    text = "\n".join(info)
    assert "workflows registered: logged; activities: flaky@1, charge@1" in text
    assert "worker runs queue job kinds: email.send" in text
    assert "worker runs event subscribers: auditor" in text
    assert "worker runs dag task kinds: pack/box" in text
    assert "subscriber auditor registered for events 'order.placed'" in text
    retry = next(m for m in info if m.startswith("activity flaky of workflow"))
    assert f"{handle.id}: attempt 1 failed, retrying in 0.00s" in retry
    assert retry.endswith("ConnectionError: carrier API reset the connection")
    suspended = next(m for m in info if m.startswith(f"workflow {handle.id} suspended"))
    assert "is uncertain: Uncertain: provider timed out after the request" in suspended
    assert "$op:charge@" in suspended


@activity(name="pay", idempotent=False)
async def pay() -> str:
    return "paid"


@workflow(name="paying")
async def paying(ctx: WorkflowContext, n: int) -> str:
    return await pay()


async def test_worker_logs_a_run_suspended_because_the_worker_running_its_call_was_lost(
    store: PostgresStore, clock: MovableClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="azync_flow")
    first = Worker(store, **FAST)
    attach_workflows(first, [paying], [])  # schedules the call, cannot run it
    handle = await Client(store).start(paying, 1)
    async with asyncio.timeout(30):
        await first.run_until_idle()
    # a worker leases the call and dies: its lease runs out
    [lost] = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind=pay.kind, limit=1, lease=timedelta(seconds=5))
    )
    clock.advance(timedelta(minutes=1))
    second = Worker(store, **FAST)
    attach_workflows(second, [paying], [pay])
    async with asyncio.timeout(30):
        await second.run_until_idle()

    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    [line] = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"workflow {handle.id} suspended")
    ]
    assert f"operation {lost.id} ($op:pay@1, attempt 1) is uncertain" in line


async def test_worker_logs_a_run_suspended_because_its_workflow_task_kept_losing_its_lease(
    store: PostgresStore, clock: MovableClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="azync_flow")
    handle = await Client(store).start(paying, 2)
    # a worker leases the pass and dies mid-pass
    [leased] = await store.lease_workflow_tasks(1, timedelta(seconds=5), WORKFLOW_TASK_KIND)
    task = leased.job
    clock.advance(timedelta(minutes=1))
    worker = Worker(store, **FAST)
    attach_workflows(worker, [paying], [pay], max_reaps=1)
    async with asyncio.timeout(30):
        await worker.run_until_idle()

    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    [line] = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"workflow {handle.id} suspended")
    ]
    assert f"workflow task {task.id} lost its lease 1 times" in line
