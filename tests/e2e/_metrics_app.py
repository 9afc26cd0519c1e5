"""An app for ``azync-flow worker tests.e2e._metrics_app:make_worker --metrics-port 0``:
every kind of thing the metrics count happens once (the factory reads
``AZYNC_DSN`` and ``AZYNC_SCHEMA``).

* ``m_order``: ``m_flaky`` fails its first attempt, then succeeds; ``m_stuck``
  hangs without heartbeating on its first attempt (the reaper takes it), then
  succeeds.
* ``m_pay``: ``m_charge`` (non-idempotent) raises ``Uncertain``; its reconcile
  hook completes it.
* ``m_fail``: the workflow fails.
* queue kind ``m.job`` fails once, then succeeds; ``m.tick`` is what the
  test's schedule enqueues; subscriber ``m-audit`` fails its first delivery.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from azync_flow import (
    Reconciled,
    Uncertain,
    WorkflowContext,
    activity,
    attach_subscribers,
    attach_workflows,
    workflow,
)
from azync_flow.activity import current_activity
from azync_flow.events import EventContext, subscriber
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import JobContext, Worker

QUICK = RetryPolicy(initial_interval=timedelta(milliseconds=100), jitter=0, maximum_attempts=3)


@activity(name="m_flaky", retry=QUICK)
async def m_flaky(n: int) -> int:
    info = current_activity()
    assert info is not None
    if info.attempt == 1:
        raise ConnectionError("first attempt fails")
    return n


@activity(name="m_stuck", retry=QUICK, heartbeat_timeout=timedelta(milliseconds=500))
async def m_stuck(n: int) -> int:
    info = current_activity()
    assert info is not None
    if info.attempt == 1:
        await asyncio.sleep(120)  # no heartbeat: its lease lapses and the reaper takes it
    return n


def find_charge(n: int, execution_key: str) -> Reconciled:
    return Reconciled.completed(f"charge-{n}")


@activity(name="m_charge", idempotent=False, reconcile=find_charge)
async def m_charge(n: int) -> str:
    raise Uncertain("the provider timed out after the request was sent")


@workflow(name="m_order")
async def m_order(ctx: WorkflowContext, n: int) -> int:
    return await m_flaky(n) + await m_stuck(n)


@workflow(name="m_pay")
async def m_pay(ctx: WorkflowContext, n: int) -> str:
    return await m_charge(n)


@workflow(name="m_fail")
async def m_fail(ctx: WorkflowContext, n: int) -> None:
    raise ValueError(f"order {n} is invalid")


async def m_job(payload: int, ctx: JobContext) -> None:
    if ctx.attempt == 1:
        raise ConnectionError("first attempt fails")


async def m_tick(payload: object) -> None:
    return None


@subscriber("m.placed", name="m-audit", retry=QUICK)
async def m_audit(payload: dict[str, int], ctx: EventContext) -> None:
    if ctx.attempt == 1:
        raise ConnectionError("first delivery fails")


async def make_worker() -> Worker:
    store = await open_store(
        os.environ["AZYNC_DSN"], Config(schema=os.environ["AZYNC_SCHEMA"]), migrate=False
    )
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=200),
        metrics_interval=timedelta(milliseconds=300),
        shutdown_grace=timedelta(seconds=1),
    )
    attach_workflows(worker, [m_order, m_pay, m_fail], [m_flaky, m_stuck, m_charge])
    worker.register("m.job", m_job, retry=QUICK)
    worker.register("m.tick", m_tick)
    attach_subscribers(worker, [m_audit])
    return worker
