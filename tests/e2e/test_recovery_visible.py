"""Recovery you can see: after a worker died mid-activity, the reaper's re-run is
counted (`stats` REAPED), the lost attempt is listed (`jobs show`), an INFO line
names the activity, run and attempt, and `workflows show` names the signal and
the timer (with its due time) the running workflow then waits on."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres.workflows.reaper import LOST_ATTEMPT
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.testing import MovableClock
from azync_flow.workflow import Registry, WorkflowContext
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]

CALLS: list[str] = []


@activity(name="rv_pack")
async def rv_pack(order: str) -> str:
    CALLS.append(order)
    return f"packed-{order}"


@workflow(name="rv_order")
async def rv_order(ctx: WorkflowContext, order: str) -> str:
    packed = await rv_pack(order)
    await ctx.wait_signal("ship", timeout=timedelta(hours=1))
    return packed


async def test_a_reaped_activity_is_counted_listed_logged_and_the_wait_is_shown(
    cmd: Cmd, store: PostgresStore, clock: MovableClock, caplog: pytest.LogCaptureFixture
) -> None:
    CALLS.clear()
    registry = Registry([rv_order], [rv_pack])
    handle = await Client(store).start(rv_order, "o-1")
    dead_worker = LocalRuntime(store, registry, cache_size=0)
    (task,) = [t.job for t in await store.lease_workflow_tasks(10, timedelta(seconds=30))]
    assert task.lease_token is not None
    await dead_worker.workflows.run_task(task, task.lease_token)  # schedules rv_pack
    (op,) = await store.dequeue_batch(
        Source.WORKFLOW,
        DequeueParams(kind="$op:rv_pack@1", limit=1, lease=timedelta(seconds=30)),
    )
    # ... and the worker holding attempt 1 dies: nothing renews or settles it.
    clock.advance(timedelta(minutes=5))
    with caplog.at_level(logging.INFO, logger="azync_flow"):
        await LocalRuntime(store, registry).run_until_idle()  # the leader reaps it
    clock.advance(timedelta(minutes=1))  # past the activity's retry backoff
    await LocalRuntime(store, registry).run_until_idle()
    assert CALLS == ["o-1"]  # attempt 2, on the live worker
    assert f"reaper: attempt 1 of activity rv_pack (workflow {handle.id}) was lost" in caplog.text
    assert "runs again as attempt 2" in caplog.text

    stats = (await cmd("stats", "--json")).json
    assert sum(d["reaped"] for d in stats["daily"]["workflow"]) >= 1
    assert "REAPED" in (await cmd("stats")).out

    shown = await cmd("jobs", "show", str(op.id), "--source", "workflow", "--json")
    attempts = shown.json["attempts"]
    assert [a["attempt"] for a in attempts] == [1]
    assert attempts[0]["error"] == LOST_ATTEMPT
    assert LOST_ATTEMPT in (await cmd("jobs", "show", str(op.id), "--source", "workflow")).out

    view = await handle.describe()
    assert view.awaited_signals == ["ship"]
    assert view.next_timer_at is not None
    wf = await cmd("workflows", "show", str(handle.id))
    assert "waiting on" in wf.out
    assert "signal 'ship'" in wf.out
    assert f"timer due {view.next_timer_at:%Y-%m-%d %H:%M:%S} UTC" in wf.out
