"""``terminate`` ends any live execution at once, without running workflow code,
on real workers: a sleeping run, a run whose activity is held by a live worker
(its late completion is refused), a run whose workflow no worker registers
(``describe`` says why it does not progress; the worker warns once), and a run
whose workflow task is leased mid-pass (the pass loses its commit)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from opentelemetry.trace import StatusCode

from azync_flow import activity, workflow
from azync_flow.client import Client, WorkflowHandle
from azync_flow.errors import NotFoundError, WorkflowTerminatedError
from azync_flow.replay import Replayer, WorkflowTerminated
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.events import EventFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture, parent_id
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

CALLS: list[str] = []
GATE: dict[str, asyncio.Event] = {}


@activity(name="term_note")
def note(tag: str) -> str:
    CALLS.append(tag)
    return tag


@activity(name="term_slow")
async def slow(tag: str) -> str:
    CALLS.append("slow:" + tag)
    GATE["started"].set()
    await GATE["release"].wait()
    return "slow " + tag


@workflow(name="term_sleeper")
async def sleeper(ctx: WorkflowContext, tag: str) -> str:
    await ctx.sleep(timedelta(hours=1))
    return await note(tag)


@workflow(name="term_waiter")
async def waiter(ctx: WorkflowContext, tag: str) -> str:
    return await slow(tag)


@workflow(name="term_first_step")
async def first_step(ctx: WorkflowContext, tag: str) -> str:
    return await note(tag)


@workflow(name="term_nosuch")
async def nosuch(ctx: WorkflowContext, tag: str) -> str:  # registered on no worker
    return tag


@asynccontextmanager
async def running(runtime: LocalRuntime) -> AsyncIterator[None]:
    """The runtime's worker running in the background until the block ends."""
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _live_jobs(store: PostgresStore, run_id: uuid.UUID) -> int:
    return int(
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_jobs WHERE run_id = $1"
            " AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')",
            run_id,
        )
    )


async def _types(handle: WorkflowHandle[Any]) -> list[str]:
    return [type(e.event).__name__ for e in await handle.history()]


async def test_terminate_ends_a_sleeping_run_without_running_its_code(
    store: PostgresStore, clock: MovableClock
) -> None:
    CALLS.clear()
    runtime = LocalRuntime(store, Registry([sleeper], [note]))
    capture = SpanCapture()
    client = Client(store, tracer_provider=capture.provider)
    handle = await client.start(sleeper, "s1")
    await runtime.run_until_idle()
    assert await _types(handle) == ["TimerStarted"]
    waiting = asyncio.create_task(handle.result(timeout=30))
    await asyncio.sleep(0.2)  # parked on its LISTEN wake-up

    await handle.terminate("customer closed the account", terminated_by="ops@desk")

    with pytest.raises(WorkflowTerminatedError) as caught:
        await asyncio.wait_for(waiting, 5)
    assert "terminated by ops@desk: customer closed the account" in str(caught.value)
    view = await handle.describe()
    assert view.state == WorkflowState.TERMINATED
    assert view.completed_at is not None
    assert view.failure_reason == "terminated by ops@desk: customer closed the account"
    history = await handle.history()
    assert [type(e.event).__name__ for e in history] == ["TimerStarted", "WorkflowTerminated"]
    last = history[-1].event
    assert isinstance(last, WorkflowTerminated)
    assert (last.reason, last.terminated_by) == ("customer closed the account", "ops@desk")
    assert await _live_jobs(store, handle.id) == 0
    unfired = await store.pool.fetchval(
        "SELECT count(*) FROM azync_workflow_timers WHERE workflow_id = $1 AND fired_at IS NULL",
        handle.id,
    )
    assert unfired == 0
    [event] = (await store.list_events(EventFilter(), 0, 10))[0]
    assert event.type == "azync.workflow.terminated"
    assert event.aggregate_id == str(handle.id)
    body = msgspec.json.decode(event.payload)
    assert body["terminated_by"] == "ops@desk"
    assert body["previous_state"] == "running"
    assert body["cancelled_timers"] == [1]
    # the run's trace: the terminate event, then the run span, exported once,
    # ending after every attempt, ERROR with the recorded reason
    [event_span] = capture.named("workflow.terminated")
    [run] = capture.named("workflow term_sleeper")
    assert parent_id(event_span) == run.context.span_id
    assert event_span.attributes["azync.terminated_by"] == "ops@desk"
    assert run.attributes["azync.state"] == "terminated"
    assert run.status.status_code is StatusCode.ERROR
    assert "customer closed the account" in (run.status.description or "")
    assert all(s.end_time <= run.end_time for s in capture.spans() if s is not run)

    clock.advance(timedelta(hours=2))  # the timer's time comes: nothing runs
    await runtime.run_until_idle()
    assert CALLS == []
    assert await _types(handle) == ["TimerStarted", "WorkflowTerminated"]
    # the terminated history still replays against the code
    assert Replayer([sleeper]).replay(await handle.recorded_history()).ok
    with pytest.raises(NotFoundError, match="terminated \\(finished\\); cannot terminate"):
        await handle.terminate("again")
    with pytest.raises(NotFoundError, match="finished"):
        await handle.signal("late")


async def test_terminate_while_a_live_worker_runs_the_activity_refuses_its_completion(
    store: PostgresStore,
) -> None:
    CALLS.clear()
    GATE["started"], GATE["release"] = asyncio.Event(), asyncio.Event()
    runtime = LocalRuntime(store, Registry([waiter], [slow]))
    handle = await Client(store).start(waiter, "w1")
    async with running(runtime):
        await asyncio.wait_for(GATE["started"].wait(), 10)
        [op_id] = await store.pool.fetchval(
            "SELECT array_agg(id) FROM azync_jobs WHERE run_id = $1 AND kind = '$op:term_slow@1'"
            " AND state = 'active'",
            handle.id,
        )
        await handle.terminate("stuck payment provider", terminated_by="ops")
        GATE["release"].set()  # the attempt finishes after the run ended
        for _ in range(100):
            if runtime.activities.late_ignored:
                break
            await asyncio.sleep(0.05)
    assert runtime.activities.late_ignored == 1
    assert CALLS == ["slow:w1"]
    assert await _types(handle) == ["ActivityScheduled", "WorkflowTerminated"]
    op = await store.pool.fetchrow(
        "SELECT state, lease_token, last_error FROM azync_jobs WHERE id = $1", op_id
    )
    assert op["state"] == "cancelled"
    assert op["lease_token"] is None
    assert "terminated by ops" in op["last_error"]
    [event] = (await store.list_events(EventFilter(), 0, 10))[0]
    body = msgspec.json.decode(event.payload)
    assert body["cancelled_operations"] == [f"{handle.id}/1 $op:term_slow@1"]
    with pytest.raises(WorkflowTerminatedError):
        await handle.result(timeout=1)


async def test_a_run_no_worker_can_run_says_why_and_terminate_ends_it(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The task of an unregistered workflow is never leased: describe() names the
    cause, the maintenance leader warns once, cancel (which needs a pass) cannot
    end it, terminate does."""
    caplog.set_level(logging.WARNING, logger="azync_flow.workflow")
    runtime = LocalRuntime(store, Registry([first_step], [note]))
    client = Client(store)
    handle = await client.start(nosuch, "x")
    other = await client.start(nosuch, "y")
    async with running(runtime):
        for _ in range(400):
            if any("term_nosuch" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
        view = await handle.describe()
        await handle.cancel()  # cooperative: needs a pass, which nobody can run
        await asyncio.sleep(0.3)
        assert (await handle.describe()).state == WorkflowState.RUNNING
        await handle.terminate("workflow was removed from the code base", terminated_by="ops")
    assert view.state == WorkflowState.RUNNING
    assert view.blocked_reason == (
        "no live worker serves workflow 'term_nosuch' on task queue 'default'"
    )
    warnings = [r for r in caplog.records if "term_nosuch" in r.getMessage()]
    assert len(warnings) == 1  # once per workflow name and queue, however many runs
    assert warnings[0].levelno == logging.WARNING
    ended = await handle.describe()
    assert ended.state == WorkflowState.TERMINATED
    assert ended.blocked_reason == ""
    assert await _live_jobs(store, handle.id) == 0
    assert await _types(handle) == ["WorkflowTerminated"]
    with pytest.raises(WorkflowTerminatedError, match="removed from the code base"):
        await handle.result(timeout=1)
    assert (await other.describe()).state == WorkflowState.RUNNING  # only the one named
    assert (await client.start(first_step, "ok")).started


async def test_a_pass_running_when_the_run_is_terminated_loses_its_commit(
    store: PostgresStore,
) -> None:
    """A worker that leased the workflow task and is mid-pass when terminate
    commits writes nothing: no events, no operations, no error escapes."""
    CALLS.clear()

    class TerminatesAfterLoad:
        """The real store; terminate commits right after the pass loaded its state."""

        def __init__(self, inner: PostgresStore, handle: WorkflowHandle[Any]) -> None:
            self.inner, self.handle = inner, handle

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        async def load_workflow_task(self, run_id: uuid.UUID, after_seq: int = 0) -> Any:
            state = await self.inner.load_workflow_task(run_id, after_seq)
            await self.handle.terminate("ended mid-pass", terminated_by="ops")
            return state

    handle = await Client(store).start(first_step, "p1")
    [task] = [t.job for t in await store.lease_workflow_tasks(1, timedelta(seconds=30))]
    assert task.lease_token is not None
    runner = WorkflowRunner(TerminatesAfterLoad(store, handle), Registry([first_step], [note]))
    assert await runner.run_task(task, task.lease_token) is None
    assert runner.passes == 0
    assert await _types(handle) == ["WorkflowTerminated"]
    ops = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", handle.id
    )
    assert ops == 0
    assert (await handle.describe()).state == WorkflowState.TERMINATED
    assert CALLS == []


async def test_terminate_with_a_reason_that_is_not_valid_utf8_records_it_escaped(
    store: PostgresStore,
) -> None:
    # a reason or author taken from an undecodable command-line argument holds a
    # lone surrogate; the free text is escaped like every other recorded reason
    client = Client(store)
    handle = await client.start(sleeper, "t-utf8")
    await handle.terminate("bad \udcff byte", terminated_by="ops \ud800")
    view = await handle.describe()
    assert view.state == WorkflowState.TERMINATED
    assert view.failure_reason == "terminated by ops \\ud800: bad \\udcff byte"
    [event] = [e.event for e in await handle.history() if isinstance(e.event, WorkflowTerminated)]
    assert (event.reason, event.terminated_by) == ("bad \\udcff byte", "ops \\ud800")
