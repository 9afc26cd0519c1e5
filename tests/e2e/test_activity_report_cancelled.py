"""An activity attempt cancelled at the moment it reports (its lease lost, the
worker stopping) still lands its report, whatever the outcome: a success, a
failure or an ``Uncertain``. The call has ended, so its outcome is real; the
attempt ends cancelled once the report is written. Real PostgreSQL, a real
worker's runners, the cancellation delivered from inside the report."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from azync_flow import Uncertain, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.runtime.worker_runtime import WORKFLOW_TASK_KIND
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Job, Source
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

LEASE = timedelta(seconds=30)


@activity(name="report_succeeds")
async def report_succeeds(n: int) -> int:
    return n + 1


@activity(name="report_fails")
async def report_fails(n: int) -> int:
    raise RuntimeError(f"provider refused {n}")


@activity(name="report_uncertain", idempotent=False)
async def report_uncertain(n: int) -> int:
    raise Uncertain(f"provider timed out on {n}")


@workflow(name="one_report")
async def one_report(ctx: WorkflowContext, which: str) -> int:
    step = {"succeeded": report_succeeds, "failed": report_fails, "uncertain": report_uncertain}
    return await step[which](1)


ACTIVITIES = {"succeeded": report_succeeds, "failed": report_fails, "uncertain": report_uncertain}


async def cancelled_while_reporting(store: PostgresStore, which: str) -> Job:
    """Run ``one_report`` up to its activity attempt, then run that attempt and
    cancel it when its report begins; returns the operation job."""
    runtime = LocalRuntime(store, Registry([one_report], list(ACTIVITIES.values())), cache_size=0)
    await Client(store).start(one_report, which)
    [task] = [t.job for t in await store.lease_workflow_tasks(1, LEASE, WORKFLOW_TASK_KIND)]
    assert task.lease_token is not None
    await runtime.workflows.run_task(task, task.lease_token)
    kind = f"$op:{ACTIVITIES[which].name}@1"
    [job] = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind=kind, limit=1, lease=LEASE)
    )
    assert job.lease_token is not None
    reports: list[str] = []
    attempt: asyncio.Task[None] | None = None

    def cancel_now(_: Job, report: str) -> None:
        reports.append(report)
        assert attempt is not None
        attempt.cancel()

    runtime.activities.before_report = cancel_now
    attempt = asyncio.create_task(runtime.activities.run_operation(job, job.lease_token))
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert reports == [which]
    return job


async def op_state(store: PostgresStore, op_id: uuid.UUID) -> tuple[str, str]:
    row = await store.pool.fetchrow("SELECT state, last_error FROM azync_jobs WHERE id = $1", op_id)
    assert row is not None
    return row["state"], row["last_error"]


async def history_types(store: PostgresStore, run_id: uuid.UUID | None) -> list[str]:
    assert run_id is not None
    return [e.type for e in await store.list_history(run_id)]


async def test_a_success_report_lands_though_the_attempt_is_cancelled_while_reporting(
    store: PostgresStore,
) -> None:
    job = await cancelled_while_reporting(store, "succeeded")
    assert (await op_state(store, job.id))[0] == "succeeded"
    assert "ActivityCompleted" in await history_types(store, job.run_id)


async def test_a_failure_report_lands_though_the_attempt_is_cancelled_while_reporting(
    store: PostgresStore,
) -> None:
    job = await cancelled_while_reporting(store, "failed")
    state, error = await op_state(store, job.id)
    assert state == "scheduled"  # rescheduled per the retry policy, not left leased
    assert "provider refused 1" in error


async def test_an_uncertain_report_lands_though_the_attempt_is_cancelled_while_reporting(
    store: PostgresStore,
) -> None:
    job = await cancelled_while_reporting(store, "uncertain")
    assert (await op_state(store, job.id))[0] == "uncertain"
    assert "OperationUncertain" in await history_types(store, job.run_id)
