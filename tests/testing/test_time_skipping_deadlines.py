"""Time skipping stops at every deadline: a skip never jumps past an
execution's or a run's timeout, nor an activity's schedule-to-start or
schedule-to-close timeout, so what the deadline ends is ended at its time and
no code runs past it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from azync_flow import (
    ActivityTimeoutError,
    RetryPolicy,
    WorkflowContext,
    WorkflowTimeoutError,
    activity,
    workflow,
)
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import WorkflowEnvironment

RAN_PAST_THE_WAIT: list[str] = []


def about(elapsed: timedelta, skipped: timedelta) -> bool:
    """``elapsed`` is ``skipped`` plus the real time the test took (the clock runs)."""
    return skipped <= elapsed < skipped + timedelta(seconds=30)


async def wait_a_week_for_approval(ctx: WorkflowContext, key: str) -> str:
    try:
        await ctx.wait_signal("approve", timeout=timedelta(days=7))
    except TimeoutError:
        RAN_PAST_THE_WAIT.append(key)  # code that runs only after the 7 days
        return "no approval"
    return "approved"


@workflow(name="week_long_signal_wait")
async def week_long_signal_wait(ctx: WorkflowContext, key: str) -> str:
    return await wait_a_week_for_approval(ctx, key)


async def test_a_week_long_wait_ends_at_a_two_day_execution_timeout_every_time(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([week_long_signal_wait], [])
    for round_no in range(5):  # the skip past the deadline raced the timer: repeat
        key = f"round {round_no}"
        began_at = env.now
        handle = await env.client.start(
            week_long_signal_wait, key, execution_timeout=timedelta(days=2)
        )
        with pytest.raises(WorkflowTimeoutError) as raised:
            await handle.result(timeout=10)
        assert raised.value.kind == "execution"
        assert about(env.now - began_at, timedelta(days=2))
        view = await handle.describe()
        assert view.completed_at is not None
        assert about(view.completed_at - began_at, timedelta(days=2))
        assert key not in RAN_PAST_THE_WAIT


async def test_env_sleep_past_an_execution_timeout_ends_the_execution_at_its_deadline(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([week_long_signal_wait], [])
    began_at = env.now
    handle = await env.client.start(
        week_long_signal_wait, "slept past", execution_timeout=timedelta(days=2)
    )
    await env.sleep(timedelta(days=10))
    view = await handle.describe()
    assert view.state == WorkflowState.FAILED
    assert view.failure_reason.startswith("WorkflowTimeoutError: execution timeout")
    assert view.completed_at is not None
    assert about(view.completed_at - began_at, timedelta(days=2))
    assert "slept past" not in RAN_PAST_THE_WAIT


@workflow(name="day_then_week_long_wait")
async def day_then_week_long_wait(ctx: WorkflowContext, run: int) -> str:
    if run == 1:
        await ctx.sleep(timedelta(days=1))
        ctx.continue_as_new(2)
    return await wait_a_week_for_approval(ctx, f"run {run}")


async def test_a_week_long_wait_ends_at_the_run_timeout_of_the_run_it_is_in(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([day_then_week_long_wait], [])
    began_at = env.now
    # the first run continues as new after a day; the second's run timeout
    # starts then, so the execution ends 1 day + 30 hours after it began
    handle = await env.client.start(day_then_week_long_wait, 1, run_timeout=timedelta(hours=30))
    with pytest.raises(WorkflowTimeoutError) as raised:
        await handle.result(timeout=10)
    assert raised.value.kind == "run"
    assert about(env.now - began_at, timedelta(days=1, hours=30))
    view = await handle.describe()
    assert view.run_no == 2
    assert view.completed_at is not None
    assert about(view.completed_at - began_at, timedelta(days=1, hours=30))
    assert "run 2" not in RAN_PAST_THE_WAIT


FAILED_ATTEMPTS: list[int] = []


@activity(
    name="fails_then_backs_off_an_hour",
    retry=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(hours=1), jitter=0),
    schedule_to_close=timedelta(minutes=30),
)
async def fails_then_backs_off_an_hour() -> str:
    FAILED_ATTEMPTS.append(len(FAILED_ATTEMPTS) + 1)
    raise RuntimeError("transient")


@workflow(name="call_bounded_by_schedule_to_close")
async def call_bounded_by_schedule_to_close(ctx: WorkflowContext, _: Any) -> str:
    began = ctx.now()
    try:
        await fails_then_backs_off_an_hour()
    except ActivityTimeoutError as err:
        return f"{err.kind} after {(ctx.now() - began).total_seconds() // 60:g} min"
    return "completed"


async def test_a_retry_backoff_past_schedule_to_close_ends_the_call_at_its_deadline(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start(
        [call_bounded_by_schedule_to_close], [fails_then_backs_off_an_hour]
    )
    began_at = env.now
    handle = await env.client.start(call_bounded_by_schedule_to_close, None)
    assert await handle.result(timeout=10) == "schedule_to_close after 30 min"
    assert FAILED_ATTEMPTS == [1]  # the retry an hour later never ran
    assert about(env.now - began_at, timedelta(minutes=30))


@activity(
    name="on_a_queue_nobody_serves",
    task_queue="nobody",
    schedule_to_start=timedelta(hours=2),
)
async def on_a_queue_nobody_serves() -> str:
    return "ran"


@workflow(name="call_bounded_by_schedule_to_start")
async def call_bounded_by_schedule_to_start(ctx: WorkflowContext, _: Any) -> str:
    try:
        return await on_a_queue_nobody_serves()
    except ActivityTimeoutError as err:
        return err.kind


async def test_a_call_no_worker_takes_ends_at_its_schedule_to_start_deadline(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([call_bounded_by_schedule_to_start], [on_a_queue_nobody_serves])
    began_at = env.now
    handle = await env.client.start(call_bounded_by_schedule_to_start, None)
    assert await handle.result(timeout=10) == "schedule_to_start"
    assert about(env.now - began_at, timedelta(hours=2))
