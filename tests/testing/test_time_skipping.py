"""Time skipping on the real store: each timed thing becomes due when the
environment's clock is moved, and runs in time order."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from azync_flow import (
    DAG,
    ActivityError,
    RetryPolicy,
    TaskContext,
    WorkflowContext,
    activity,
    workflow,
)
from azync_flow.errors import NotReady, Snooze
from azync_flow.events import subscriber
from azync_flow.store.dags import DAGState
from azync_flow.testing import WorkflowEnvironment

CALLS: list[str] = []


def about(elapsed: timedelta, skipped: timedelta) -> bool:
    """``elapsed`` is ``skipped`` plus the real time the test took (the clock runs)."""
    return skipped <= elapsed < skipped + timedelta(seconds=30)


@activity(
    name="flaky",
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(hours=1), jitter=0),
)
async def flaky(key: str) -> str:
    CALLS.append(key)
    if CALLS.count(key) < 2:
        raise RuntimeError("transient")
    return f"ok {key}"


@workflow(name="sleeper")
async def sleeper(ctx: WorkflowContext, days: int) -> str:
    await ctx.sleep(timedelta(days=days))
    return f"slept {days}d"


@workflow(name="month_then_retry_then_silence")
async def month_then_retry_then_silence(ctx: WorkflowContext, key: str) -> str:
    await ctx.sleep(timedelta(days=30))
    done = await flaky(key)
    try:
        await ctx.wait_signal("approve", timeout=timedelta(days=7))
    except TimeoutError:
        return f"{done}, no approval"
    return f"{done}, approved"


async def test_a_month_long_sleep_retry_backoff_and_signal_timeout_finish_without_waiting_them(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([month_then_retry_then_silence, sleeper], [flaky])
    # One short run first: the pool's connections prepare their statements once.
    assert await (await env.client.start(sleeper, 1)).result(timeout=10) == "slept 1d"
    began_at = env.now
    handle = await env.client.start(month_then_retry_then_silence, "accept")
    # 37 days of timers, backoff and waiting inside a 10 s real-time budget
    # (speed itself is measured outside tests: about 0.3 s on a quiet machine)
    assert await handle.result(timeout=10) == "ok accept, no approval"
    # each run: 30 days of sleep + 1 hour of backoff + 7 days of waiting
    assert about(env.now - began_at, timedelta(days=37, hours=1))


async def test_env_sleep_fires_a_workflow_sleep_only_once_its_time_has_come(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([sleeper], [])
    with env.auto_time_skipping_disabled():
        handle = await env.client.start(sleeper, 30)
        await env.sleep(timedelta(days=29, hours=23))
        assert (await handle.describe()).state == "running"
        with pytest.raises(TimeoutError):
            await handle.result(timeout=0.3)  # time stands still without skipping
        await env.sleep(timedelta(hours=1))
        assert (await handle.describe()).state == "succeeded"
        assert await handle.result(timeout=5) == "slept 30d"


@workflow(name="approval")
async def approval(ctx: WorkflowContext, hours: int) -> str:
    try:
        got = await ctx.wait_signal("approve", timeout=timedelta(hours=hours))
    except TimeoutError:
        return "timed out"
    return f"approved by {got['by']}"


async def test_signal_wait_timeout_fires_when_skipped_past_and_not_before(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([approval], [])
    late = await env.client.start(approval, 48)
    on_time = await env.client.start(approval, 48)
    await env.sleep(timedelta(hours=47))
    await on_time.signal("approve", {"by": "ann"})
    await env.sleep(timedelta(hours=2))
    assert await late.result(timeout=5) == "timed out"
    assert await on_time.result(timeout=5) == "approved by ann"


ORDER: list[str] = []


@activity(name="note")
async def note(what: str) -> None:
    ORDER.append(what)


@workflow(name="timed_note")
async def timed_note(ctx: WorkflowContext, minutes: int) -> None:
    await ctx.sleep(timedelta(minutes=minutes))
    await note(f"{minutes}m")


async def test_env_sleep_runs_everything_due_in_time_order(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([timed_note], [note])
    ORDER.clear()
    for minutes in (50, 10, 30, 20, 40):
        await env.client.start(timed_note, minutes)
    await env.sleep(timedelta(hours=1))
    assert ORDER == ["10m", "20m", "30m", "40m", "50m"]


@activity(
    name="always_fails",
    retry=RetryPolicy(
        maximum_attempts=3, initial_interval=timedelta(hours=2), backoff_coefficient=1, jitter=0
    ),
)
async def always_fails() -> None:
    raise RuntimeError("down")


@workflow(name="gives_up")
async def gives_up(ctx: WorkflowContext, _: Any) -> str:
    try:
        await always_fails()
    except ActivityError as err:
        return f"gave up after {err.attempts}"
    return "unreachable"


async def test_retry_backoff_waits_for_skipped_time_and_run_until_settled_skips_it(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([gives_up], [always_fails])
    began_at = env.now
    handle = await env.client.start(gives_up, None)
    await env.sleep(timedelta(hours=1, minutes=59))
    history = [type(e.event).__name__ for e in await handle.history()]
    assert "ActivityFailed" not in history  # the second attempt is still 1 min away
    await env.run_until_settled()
    assert (await handle.describe()).state == "succeeded"
    assert await handle.result(timeout=1) == "gave up after 3"
    assert about(env.now - began_at, timedelta(hours=4))  # two 2-hour backoffs


async def test_a_queue_job_snooze_is_due_after_its_delay(
    workflow_env: WorkflowEnvironment,
) -> None:
    seen: list[int] = []

    @workflow_env.worker.register("poll.until.ready")
    async def poll(payload: dict[str, int]) -> None:
        seen.append(payload["n"])
        if len(seen) < 3:
            raise Snooze(timedelta(days=1))

    env = await workflow_env.start()
    began_at = env.now
    await env.client.enqueue("poll.until.ready", {"n": 1})
    await env.sleep(timedelta(hours=23))
    assert len(seen) == 1
    await env.sleep(timedelta(days=2))
    assert len(seen) == 3
    await env.run_until_settled()
    assert len(seen) == 3
    assert about(env.now - began_at, timedelta(days=2, hours=23))


async def test_a_queue_job_retry_backoff_is_skipped_over(
    workflow_env: WorkflowEnvironment,
) -> None:
    attempts: list[int] = []

    @workflow_env.worker.register(
        "invoice.send",
        retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(hours=2), jitter=0),
    )
    async def send(payload: dict[str, str]) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 3:
            raise ConnectionError("smtp down")

    env = await workflow_env.start()
    began_at = env.now
    await env.client.enqueue("invoice.send", {"to": "ann"})
    await env.sleep(timedelta(hours=1, minutes=59))
    assert attempts == [1]
    await env.run_until_settled()
    assert attempts == [1, 2, 3]
    assert about(env.now - began_at, timedelta(hours=6))  # 2 h, then 4 h


MAILED: list[str] = []


@subscriber(
    "invoice.paid",
    name="receipt_mailer",
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(hours=1), jitter=0),
)
async def receipt_mailer(payload: dict[str, str]) -> None:
    MAILED.append(payload["id"])
    if len(MAILED) < 2:
        raise ConnectionError("smtp down")


async def test_a_subscriber_delivery_retry_is_skipped_over_and_events_outlive_the_skip(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start(subscribers=[receipt_mailer])
    MAILED.clear()
    event_id = await env.client.publish("invoice.paid", {"id": "i-1"})
    await env.settle()
    assert MAILED == ["i-1"]
    await env.sleep(timedelta(minutes=59))
    assert MAILED == ["i-1"]
    await env.sleep(timedelta(minutes=1))
    assert MAILED == ["i-1", "i-1"]
    await env.sleep(timedelta(days=30))  # past the production ledger retention of 7 days
    assert (await env.store.get_event(event_id)).id == event_id


async def test_subscriptions_are_recorded_when_start_returns(
    workflow_env: WorkflowEnvironment,
) -> None:
    """An event published right after start() reaches the subscriber: its
    subscription does not wait for the worker's first lease."""
    env = await workflow_env.start(subscribers=[receipt_mailer])
    views = await env.store.list_subscriber_views("invoice.paid")
    assert [v.subscriber for v in views] == ["receipt_mailer"]


nightly = DAG("nightly")
DAG_RAN: list[str] = []


@nightly.task
async def prepare(ctx: TaskContext) -> str:
    DAG_RAN.append("prepare")
    return "prepared"


nightly.sleep("cool_down", timedelta(hours=8), after=[prepare])
ATTEMPTS: list[int] = []


@nightly.task(after=["cool_down"])
async def publish(ctx: TaskContext) -> str:
    ATTEMPTS.append(1)
    if len(ATTEMPTS) < 2:
        raise NotReady(timedelta(minutes=30))  # a DAG task's snooze
    DAG_RAN.append("publish")
    return "published"


async def test_dag_sleep_task_and_not_ready_snooze_are_skipped_over(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start(dags=[nightly])
    DAG_RAN.clear()
    ATTEMPTS.clear()
    run = await env.dags.run(nightly, {})
    await env.sleep(timedelta(hours=7))
    assert DAG_RAN == ["prepare"]
    await env.sleep(timedelta(hours=1))
    assert ATTEMPTS == [1]  # woke after the sleep, snoozed for 30 minutes
    await env.sleep(timedelta(minutes=30))
    assert DAG_RAN == ["prepare", "publish"]
    await env.run_until_settled()
    assert (await env.dags.get(run.id)).state == DAGState.SUCCEEDED


@workflow(name="forever_waiting")
async def forever_waiting(ctx: WorkflowContext, _: Any) -> str:
    got = await ctx.wait_signal("go")
    return str(got)


async def test_run_until_settled_returns_for_a_signal_wait_without_timeout_and_for_a_handle(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([forever_waiting, sleeper], [])
    waiting = await env.client.start(forever_waiting, None)
    await env.run_until_settled(timeout=5)
    assert (await waiting.describe()).state == "running"
    short = await env.client.start(sleeper, 1)
    long = await env.client.start(sleeper, 10)
    await env.run_until_settled(short, timeout=5)
    assert (await short.describe()).state == "succeeded"
    assert (await long.describe()).state == "running"
    await waiting.signal("go", "now")
    assert await waiting.result(timeout=5) == "now"


async def test_executions_finished_before_a_long_skip_are_kept_for_the_test(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([sleeper], [])
    quick = await env.client.start(sleeper, 0)
    assert await quick.result(timeout=5) == "slept 0d"
    await env.sleep(timedelta(days=365))  # far past the production retention of 7 days
    assert await quick.result(timeout=1) == "slept 0d"


async def test_handles_started_by_name_or_looked_up_skip_time_too(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([sleeper], [])
    by_name = await env.client.start("sleeper", 3)
    assert await by_name.result(timeout=5) == "slept 3d"
    started = await env.client.start(sleeper, 5)
    looked_up = env.client.get_handle(started.id, sleeper)
    assert await looked_up.result(timeout=5) == "slept 5d"


@activity(name="slow_step")
async def slow_step() -> None:
    await asyncio.sleep(0.3)  # real time: the environment's clock runs meanwhile


@workflow(name="minute_then_slow_step")
async def minute_then_slow_step(ctx: WorkflowContext, _: Any) -> None:
    await ctx.sleep(timedelta(minutes=1))
    await slow_step()


async def test_time_never_runs_backwards_across_skips(workflow_env: WorkflowEnvironment) -> None:
    env = await workflow_env.start([minute_then_slow_step], [slow_step])
    handle = await env.client.start(minute_then_slow_step, None)
    await env.settle()  # the timer is set now: due a minute from here
    await env.sleep(timedelta(minutes=1))  # ends a hair after the timer; the step takes 0.3 s
    last_write = await env.store.pool.fetchval("SELECT max(updated_at) FROM azync_jobs")
    assert env.now >= last_write
    assert (await handle.describe()).state == "succeeded"


async def test_results_awaited_together_skip_time_once(workflow_env: WorkflowEnvironment) -> None:
    env = await workflow_env.start([sleeper], [])
    began_at = env.now
    short, long = await env.client.start(sleeper, 3), await env.client.start(sleeper, 5)
    results = await asyncio.gather(long.result(timeout=10), short.result(timeout=10))
    assert results == ["slept 5d", "slept 3d"]
    assert about(env.now - began_at, timedelta(days=5))
