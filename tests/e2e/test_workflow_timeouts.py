"""Workflow and activity timeouts on real workers: each kind fires on the
database clock (moved by the testing kit's clock), ends or retries by its
rule, and is recorded in history."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.errors import (
    ActivityTimeoutError,
    ChildWorkflowTimeoutError,
    WorkflowTimeoutError,
)
from azync_flow.replay import Replayer
from azync_flow.replay.events import ActivityFailed, WorkflowTimedOut, decode_event
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import run_span_id
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext
from tests.cli_runner import Cli

#: A task queue no worker of these tests serves: its activities are never leased.
NOWHERE = "to_nowhere"

calls: dict[str, int] = {}


@activity(name="to_parked", task_queue=NOWHERE)
async def parked(n: int) -> int:
    return n


@activity(name="to_unleased", task_queue=NOWHERE, schedule_to_start=timedelta(minutes=1))
async def unleased(n: int) -> int:
    return n


@activity(
    name="to_flaky",
    schedule_to_close=timedelta(minutes=10),
    retry=RetryPolicy(initial_interval=timedelta(hours=1), maximum_attempts=5, jitter=0),
)
async def flaky(n: int) -> int:
    calls["to_flaky"] = calls.get("to_flaky", 0) + 1
    raise RuntimeError("down")


@activity(
    name="to_slow",
    start_to_close=timedelta(seconds=0.2),
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=1), maximum_attempts=2, jitter=0),
)
async def slow(n: int) -> int:
    calls["to_slow"] = calls.get("to_slow", 0) + 1
    await asyncio.sleep(30)
    return n


@activity(
    name="to_silent",
    heartbeat_timeout=timedelta(milliseconds=500),
    retry=RetryPolicy(initial_interval=timedelta(milliseconds=10), maximum_attempts=2, jitter=0),
)
async def silent(n: int) -> int:
    calls["to_silent"] = calls.get("to_silent", 0) + 1
    await asyncio.sleep(60)  # never heartbeats
    return n


@activity(
    name="to_quick",
    schedule_to_start=timedelta(minutes=1),
    schedule_to_close=timedelta(minutes=1),
)
async def quick(n: int) -> int:
    return n + 1


@workflow(name="to_waits_forever")
async def waits_forever(ctx: WorkflowContext, n: int) -> int:
    task = asyncio.ensure_future(parked(n))
    await ctx.sleep(timedelta(days=1))
    return await task


@workflow(name="to_hops")
async def hops(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(minutes=5))
    if n > 0:
        ctx.continue_as_new(n - 1)
    await ctx.wait_signal("never")
    return n


@workflow(name="to_catches_activity")
async def catches_activity(ctx: WorkflowContext, which: str) -> str:
    act = {"unleased": unleased, "flaky": flaky, "slow": slow, "silent": silent}[which]
    try:
        await act(1)
    except ActivityTimeoutError as err:
        return f"{err.kind}|{err.error_type}|{err.attempts}"
    return "no timeout"


@workflow(name="to_child")
async def child(ctx: WorkflowContext, n: int) -> int:
    await ctx.wait_signal("never")
    return n


@workflow(name="to_parent")
async def parent(ctx: WorkflowContext, n: int) -> str:
    try:
        await ctx.execute_child(child, n, run_timeout=timedelta(minutes=1))
    except ChildWorkflowTimeoutError as err:
        return f"child {err.kind} timeout: {err.error_type}"
    return "child finished"


@workflow(name="to_in_time")
async def in_time(ctx: WorkflowContext, n: int) -> int:
    return await quick(n)


WORKFLOWS = [waits_forever, hops, catches_activity, child, parent, in_time]
ACTIVITIES = [parked, unleased, flaky, slow, silent, quick]


def make_worker(store: PostgresStore) -> Worker:
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, WORKFLOWS, ACTIVITIES)
    return worker


async def run(store: PostgresStore) -> None:
    async with asyncio.timeout(60):
        await make_worker(store).run_until_idle()


async def history(store: PostgresStore, workflow_id: object) -> list[object]:
    rows = await store.pool.fetch(
        "SELECT type, payload FROM azync_workflow_history WHERE workflow_id = $1 ORDER BY seq",
        workflow_id,
    )
    return [decode_event(r["type"], bytes(r["payload"])) for r in rows]


async def test_execution_timeout_fails_the_execution_and_cancels_its_work(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(waits_forever, 1, execution_timeout=timedelta(minutes=10))
    await run(store)
    view = await handle.describe()
    assert view.state == WorkflowState.RUNNING
    assert view.execution_timeout == timedelta(minutes=10)
    assert view.timeout_at == view.created_at + timedelta(minutes=10)
    clock.advance(timedelta(minutes=9))
    await run(store)
    assert (await handle.describe()).state == WorkflowState.RUNNING
    clock.advance(timedelta(minutes=2))
    await run(store)
    with pytest.raises(WorkflowTimeoutError) as caught:
        await handle.result(timeout=5)
    assert (caught.value.kind, caught.value.timeout_s) == ("execution", 600)
    assert (await handle.describe()).failure_reason == (
        "WorkflowTimeoutError: execution timeout of 600s elapsed"
    )
    events = await history(store, handle.id)
    assert WorkflowTimedOut(kind="execution", timeout_s=600) in events
    # its activity and timer were cancelled as terminate cancels them
    jobs = await store.pool.fetch(
        "SELECT task_key, state FROM azync_jobs WHERE run_id = $1", handle.id
    )
    assert {r["state"] for r in jobs} <= {"cancelled", "succeeded"}
    assert any(r["task_key"] != "$wft" and r["state"] == "cancelled" for r in jobs)
    unfired = await store.pool.fetchval(
        "SELECT count(*) FROM azync_workflow_timers WHERE workflow_id = $1 AND fired_at IS NULL",
        handle.id,
    )
    assert unfired == 0
    # the timed-out history still replays against the code
    assert Replayer([waits_forever]).replay(await handle.recorded_history()).ok


async def test_a_timed_out_execution_exports_its_run_span_once(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    cap = SpanCapture()
    handle = await Client(store, tracer_provider=cap.provider).start(
        child, 1, execution_timeout=timedelta(minutes=1)
    )
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, WORKFLOWS, ACTIVITIES, tracer_provider=cap.provider)
    await worker.run_until_idle()
    assert cap.named("workflow to_child") == []
    clock.advance(timedelta(minutes=2))
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, WORKFLOWS, ACTIVITIES, tracer_provider=cap.provider)
    await worker.run_until_idle()
    [run] = cap.named("workflow to_child")
    assert (run.context.span_id, run.attributes["azync.state"]) == (
        run_span_id(handle.id),
        "failed",
    )


async def test_a_start_with_its_first_pass_on_the_worker_keeps_its_timeouts(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    worker = make_worker(store)
    async with worker:
        client = Client.for_worker(worker)
        handle = await client.start(child, 1, run_timeout=timedelta(minutes=1))
        view = await handle.describe()
        assert (view.run_timeout, view.timeout_at) == (
            timedelta(minutes=1),
            view.created_at + timedelta(minutes=1),
        )
        start_many = await Client(store).start_many(
            child, [2, 3], execution_timeout=timedelta(minutes=1)
        )
    clock.advance(timedelta(minutes=2))
    await run(store)
    for h in [handle, *start_many]:
        with pytest.raises(WorkflowTimeoutError):
            await h.result(timeout=5)


async def test_run_timeout_starts_again_with_each_continue_as_new(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(hops, 1, run_timeout=timedelta(minutes=10))
    await run(store)
    clock.advance(timedelta(minutes=6))  # run 1's timer fires: it continues as new
    await run(store)
    view = await handle.describe()
    assert view.run_no == 2
    clock.advance(timedelta(minutes=6))  # 12 min since start: past run 1's deadline only
    await run(store)
    assert (await handle.describe()).state == WorkflowState.RUNNING
    clock.advance(timedelta(minutes=5))  # 11 min into run 2
    await run(store)
    with pytest.raises(WorkflowTimeoutError) as caught:
        await handle.result(timeout=5)
    assert caught.value.kind == "run"
    assert WorkflowTimedOut(kind="run", timeout_s=600) in await history(store, handle.id)


async def test_execution_timeout_spans_continue_as_new_runs(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(
        hops, 5, execution_timeout=timedelta(minutes=13), run_timeout=timedelta(hours=1)
    )
    await run(store)
    for _ in range(2):  # two runs of 5+ minutes each: 12 min, a minute short of the deadline
        clock.advance(timedelta(minutes=6))
        await run(store)
    assert (await handle.describe()).run_no == 3
    clock.advance(timedelta(minutes=2))  # 14 min since the start, before run 3's timer
    await run(store)
    with pytest.raises(WorkflowTimeoutError) as caught:
        await handle.result(timeout=5)
    assert caught.value.kind == "execution"


async def test_parent_catches_the_timeout_of_its_child(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(parent, 3)
    await run(store)
    kids = await store.pool.fetch(
        "SELECT id, run_timeout FROM azync_workflow_executions WHERE parent_id = $1", handle.id
    )
    assert [k["run_timeout"] for k in kids] == [timedelta(minutes=1)]
    clock.advance(timedelta(minutes=2))
    await run(store)
    assert await handle.result(timeout=5) == "child run timeout: WorkflowTimeoutError"
    kid = await Client(store).get_handle(kids[0]["id"]).describe()
    assert kid.state == WorkflowState.FAILED


async def test_schedule_to_start_timeout_fails_the_call_without_retry(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(catches_activity, "unleased")
    await run(store)
    assert (await handle.describe()).state == WorkflowState.RUNNING
    clock.advance(timedelta(minutes=2))
    await run(store)
    assert await handle.result(timeout=5) == "schedule_to_start|ActivityTimeoutError|0"
    failed = [e for e in await history(store, handle.id) if isinstance(e, ActivityFailed)]
    assert [e.timeout for e in failed] == ["schedule_to_start"]
    op = await store.pool.fetchrow(
        "SELECT state, attempt, last_error FROM azync_jobs"
        " WHERE run_id = $1 AND task_key <> '$wft'",
        handle.id,
    )
    assert (op["state"], op["attempt"]) == ("dead", 0)
    assert op["last_error"] == "ActivityTimeoutError: schedule_to_start timeout of 60s elapsed"


async def test_schedule_to_close_timeout_cuts_the_retries_short(
    store: PostgresStore, clock: MovableClock
) -> None:
    calls.clear()
    clock.advance(timedelta(0))
    handle = await Client(store).start(catches_activity, "flaky")
    await run(store)  # attempt 1 fails; the retry waits an hour
    assert calls["to_flaky"] == 1
    clock.advance(timedelta(minutes=11))
    await run(store)
    assert await handle.result(timeout=5) == "schedule_to_close|ActivityTimeoutError|1"
    assert calls["to_flaky"] == 1  # not retried
    failed = [e for e in await history(store, handle.id) if isinstance(e, ActivityFailed)]
    assert [e.timeout for e in failed] == ["schedule_to_close"]


async def test_start_to_close_timeout_retries_by_the_policy_and_names_its_kind(
    store: PostgresStore,
) -> None:
    calls.clear()
    handle = await Client(store).start(catches_activity, "slow")
    await run(store)
    assert await handle.result(timeout=5) == "start_to_close|TimeoutError|2"
    assert calls["to_slow"] == 2  # retried once, by the policy's budget of 2
    failed = [e for e in await history(store, handle.id) if isinstance(e, ActivityFailed)]
    assert [e.timeout for e in failed] == ["start_to_close"]


async def test_heartbeat_timeout_retries_by_the_policy_and_names_its_kind(
    store: PostgresStore,
) -> None:
    calls.clear()
    worker = Worker(
        store,
        lease=timedelta(seconds=30),  # only heartbeats could renew a silent attempt
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=100),
        shutdown_grace=timedelta(milliseconds=200),
        handle_signals=False,
    )
    attach_workflows(worker, WORKFLOWS, ACTIVITIES)
    handle = await Client(store).start(catches_activity, "silent")
    async with worker:
        result = await handle.result(timeout=30)
    # lost twice, the policy's budget of 2 (not the worker's 5 reaps)
    assert result == "heartbeat|LeaseExpired|2"
    assert calls["to_silent"] == 2
    failed = [e for e in await history(store, handle.id) if isinstance(e, ActivityFailed)]
    assert [e.timeout for e in failed] == ["heartbeat"]


async def test_timeouts_do_not_fire_when_the_work_finishes_in_time(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(
        in_time, 41, execution_timeout=timedelta(minutes=1), run_timeout=timedelta(minutes=1)
    )
    await run(store)
    assert await handle.result(timeout=5) == 42
    clock.advance(timedelta(hours=1))  # every deadline is long past
    await run(store)
    view = await handle.describe()
    assert (view.state, view.failure_reason) == (WorkflowState.SUCCEEDED, "")
    assert await handle.result(timeout=5) == 42
    op_state = await store.pool.fetchval(
        "SELECT state FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", handle.id
    )
    assert op_state == "succeeded"
    assert not any(
        isinstance(e, WorkflowTimedOut | ActivityFailed) for e in await history(store, handle.id)
    )


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"execution_timeout": timedelta(0)}, ValueError, "execution_timeout must be positive"),
        ({"run_timeout": timedelta(seconds=-1)}, ValueError, "run_timeout must be positive"),
        ({"run_timeout": 30}, TypeError, r"run_timeout must be a datetime\.timedelta"),
        ({"execution_timeout": timedelta.max}, ValueError, "at most 36500 days"),
    ],
    ids=["zero", "negative", "not-a-timedelta", "past-any-timestamp"],
)
async def test_a_bad_workflow_timeout_is_refused_and_nothing_is_started(
    store: PostgresStore, options: dict[str, object], error: type[Exception], message: str
) -> None:
    client = Client(store)
    with pytest.raises(error, match=message):
        await client.start(in_time, 1, **options)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        await client.start_many(in_time, [1], **options)  # type: ignore[arg-type]
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_executions") == 0


def test_a_bad_activity_timeout_is_refused_where_it_is_declared() -> None:
    with pytest.raises(ValueError, match="schedule_to_close must be positive"):
        activity(name="to_bad", schedule_to_close=timedelta(0))
    with pytest.raises(TypeError, match=r"schedule_to_start must be a datetime\.timedelta"):
        quick.with_options(schedule_to_start=5)
    with pytest.raises(ValueError, match="schedule_to_close must be at most 36500 days"):
        activity(name="to_huge", schedule_to_close=timedelta.max)


async def test_the_cli_result_of_a_timed_out_execution_is_a_failure(
    store: PostgresStore, clock: MovableClock, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock.advance(timedelta(0))
    handle = await Client(store).start(waits_forever, 1, run_timeout=timedelta(minutes=1))
    await run(store)
    clock.advance(timedelta(minutes=2))
    await run(store)
    code, out, _ = await Cli(pg_dsn, store.schema, capsys)("workflows", "result", str(handle.id))
    assert code == 1
    assert out["state"] == "failed"
    assert "run timeout of 60s elapsed" in out["error"]
