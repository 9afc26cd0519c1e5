"""WorkflowEnvironment lifecycle: what it accepts, what it refuses, what it keeps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from azync_flow import Registry, WorkflowContext, workflow
from azync_flow.testing import WorkflowEnvironment


@workflow(name="env_echo")
async def echo(ctx: WorkflowContext, text: str) -> str:
    await ctx.sleep(timedelta(hours=1))
    return text


async def test_a_registry_is_accepted_in_place_of_lists(workflow_env: WorkflowEnvironment) -> None:
    env = await workflow_env.start(Registry([echo], []))
    handle = await env.client.start(echo, "hi")
    assert await handle.result(timeout=5) == "hi"


async def test_driving_time_before_start_or_starting_twice_is_refused(
    workflow_env: WorkflowEnvironment,
) -> None:
    with pytest.raises(RuntimeError, match="start the environment first"):
        await workflow_env.sleep(timedelta(seconds=1))
    await workflow_env.start([echo])
    with pytest.raises(RuntimeError, match="already started"):
        await workflow_env.start([echo])
    with pytest.raises(ValueError, match="non-negative"):
        await workflow_env.sleep(timedelta(seconds=-1))


async def test_the_clock_starts_now_and_runs_at_real_speed(
    workflow_env: WorkflowEnvironment,
) -> None:
    env = await workflow_env.start([echo])
    first = env.now
    await env.settle()
    assert env.now > first  # runs on: timestamps keep their order
    assert env.clock.flowing
