"""an activity report that arrives after its attempt was declared crashed
(lease expired) never completes the step twice.

* non-idempotent attempt parked uncertain, then its real outcome arrives: the
  late report resolves the uncertain operation (``accept_late_report``), once;
* idempotent attempt reaped and re-run by another attempt that completed: the
  late report of the first attempt is dropped ("late outcome ignored").
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.runtime.uncertain import uncertain_event
from azync_flow.runtime.worker_runtime import lease_expired_event
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import run_span_id
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture, parent_id
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

CALLS: list[int] = []
GATE: dict[str, asyncio.Event] = {}


async def _first_call_waits(x: int) -> str:
    CALLS.append(x)
    if len(CALLS) == 1:
        GATE["started"].set()
        await GATE["release"].wait()
        return f"first attempt {x}"
    return f"second attempt {x}"


@activity(name="late_wire", idempotent=False)
async def late_wire(x: int) -> str:
    return await _first_call_waits(x)


@activity(name="late_pay")
async def late_pay(x: int) -> str:
    return await _first_call_waits(x)


@workflow(name="late_wire_wf")
async def late_wire_wf(ctx: WorkflowContext, x: int) -> str:
    return await late_wire(x)


@workflow(name="late_pay_wf")
async def late_pay_wf(ctx: WorkflowContext, x: int) -> str:
    return await late_pay(x)


async def _start_first_attempt(
    store: PostgresStore, runtime: LocalRuntime, handle: object, kind: str
) -> asyncio.Task[None]:
    CALLS.clear()
    GATE["started"] = asyncio.Event()
    GATE["release"] = asyncio.Event()
    [task] = [t.job for t in await store.lease_workflow_tasks(10, timedelta(seconds=30))]
    assert task.lease_token is not None
    await runtime.workflows.run_task(task, task.lease_token)  # schedules the operation
    [op] = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind=kind, limit=1, lease=timedelta(seconds=30))
    )
    assert op.lease_token is not None
    attempt = asyncio.create_task(runtime.activities.run_operation(op, op.lease_token))
    await GATE["started"].wait()
    return attempt


async def _types(handle: object) -> list[str]:
    return [type(e.event).__name__ for e in await handle.history()]  # type: ignore[attr-defined]


async def test_late_report_of_an_uncertain_attempt_resolves_it_once(
    store: PostgresStore, clock: MovableClock
) -> None:
    capture = SpanCapture()
    runtime = LocalRuntime(
        store, Registry([late_wire_wf], [late_wire]), tracer_provider=capture.provider
    )
    handle = await Client(store, tracer_provider=capture.provider).start(late_wire_wf, 7)
    attempt = await _start_first_attempt(store, runtime, handle, "$op:late_wire@1")
    clock.advance(timedelta(minutes=1))  # the attempt's lease expires: its worker looks dead
    assert len(await store.reap_uncertain_operations(uncertain_event)) == 1
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    GATE["release"].set()  # ...but it was alive and now reports success
    await attempt
    assert runtime.activities.late_ignored == 0
    [event] = capture.named("uncertain.resolved late_wire")
    assert parent_id(event) == run_span_id(handle.id)
    # the attempt's own span records its outcome: it completed (late)
    [wire_span] = capture.named("activity late_wire")
    assert wire_span.attributes["azync.outcome"] == "succeeded"
    history = await handle.history()
    resolved = [e.event for e in history if type(e.event).__name__ == "OperationResolved"]
    assert [r.decided_by for r in resolved] == ["late report of attempt 1"]
    assert (await handle.describe()).state == WorkflowState.RUNNING
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "first attempt 7"
    assert CALLS == [7]  # never re-run
    assert (await _types(handle)).count("ActivityCompleted") == 1


async def test_late_report_after_a_rerun_completed_is_ignored(
    store: PostgresStore, clock: MovableClock
) -> None:
    runtime = LocalRuntime(store, Registry([late_pay_wf], [late_pay]))
    handle = await Client(store).start(late_pay_wf, 8)
    attempt = await _start_first_attempt(store, runtime, handle, "$op:late_pay@1")
    clock.advance(timedelta(minutes=1))
    report = await store.reap_expired_operations(lease_expired_event)
    assert report.reaped == 1
    await runtime.run_until_idle()  # attempt 2 runs and completes the run
    assert await handle.result(timeout=5) == "second attempt 8"
    GATE["release"].set()  # attempt 1 finally reports
    await attempt
    assert runtime.activities.late_ignored == 1
    assert CALLS == [8, 8]
    types = await _types(handle)
    assert types.count("ActivityCompleted") == 1
    assert (await handle.describe()).state == WorkflowState.SUCCEEDED


async def test_an_attempt_cancelled_while_reporting_its_outcome_still_reports_it_late(
    store: PostgresStore, clock: MovableClock
) -> None:
    """The call returned, then the attempt lost its lease while its report was
    on the way (a partition from the database): the worker cancels the
    attempt, yet the report still goes on and resolves the uncertain
    operation as a late report, instead of being dropped."""
    runtime = LocalRuntime(store, Registry([late_wire_wf], [late_wire]))
    handle = await Client(store).start(late_wire_wf, 8)
    settling, resume = asyncio.Event(), asyncio.Event()

    async def partitioned(job: object, event_type: str) -> None:
        settling.set()
        await resume.wait()  # the report cannot reach the database yet

    runtime.activities.before_settle = partitioned
    attempt = await _start_first_attempt(store, runtime, handle, "$op:late_wire@1")
    GATE["release"].set()  # the call returns ...
    await settling.wait()  # ... and its report is on the way
    clock.advance(timedelta(minutes=1))  # the lease expires: the reaper parks it
    assert len(await store.reap_uncertain_operations(uncertain_event)) == 1
    attempt.cancel()  # the worker saw its lease lost
    await asyncio.sleep(0)
    resume.set()  # the database is reachable again
    with contextlib.suppress(asyncio.CancelledError):
        await attempt
    history = await handle.history()
    resolved = [e.event for e in history if type(e.event).__name__ == "OperationResolved"]
    assert [r.decided_by for r in resolved] == ["late report of attempt 1"]
    runtime.activities.before_settle = None
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "first attempt 8"
    assert CALLS == [8]
