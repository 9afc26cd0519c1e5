"""Continue-as-new end to end on a real PostgreSQL and a real Worker, in both
cache modes: the run chain, bounded history, signals carried over, result
following the chain, children closed at the run's end, and the history limit."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import NotFoundError
from azync_flow.replay import Replayer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.workflow import HistoryLimit, Registry, WorkflowContext
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]


class Loop(msgspec.Struct):
    i: int
    n: int
    total: int = 0


@activity(name="add")
def add(a: int, b: int) -> int:
    return a + b


@workflow(name="counter")
async def counter(ctx: WorkflowContext, state: Loop) -> dict[str, Any]:
    total = await add(state.total, state.i)
    if state.i + 1 < state.n:
        ctx.continue_as_new(Loop(state.i + 1, state.n, total))
    return {"total": total, "run_id": str(ctx.info.current_run_id)}


@workflow(name="inbox")
async def inbox(ctx: WorkflowContext, got: list[str]) -> list[str]:
    """Consumes one signal per run; ends when it has received 'stop'."""
    value = await ctx.wait_signal("item")
    got = [*got, value]
    if value == "stop":
        return got
    ctx.continue_as_new(got)


@workflow(name="sleeper_kid")
async def sleeper_kid(ctx: WorkflowContext) -> str:
    await ctx.wait_signal("never")
    return "woke"


@workflow(name="renewing_parent")
async def renewing_parent(ctx: WorkflowContext, round: int) -> str:
    await ctx.start_child(sleeper_kid)
    if round == 0:
        ctx.continue_as_new(1)
    await ctx.wait_signal("end")
    return "done"


@workflow(name="chatty")
async def chatty(ctx: WorkflowContext, n: int) -> str:
    for i in range(n):
        await add(i, i)
    await ctx.wait_signal("end")
    return "done"


WORKFLOWS = [counter, inbox, sleeper_kid, renewing_parent, chatty]


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry(WORKFLOWS, [add]), cache_size=request.param)


async def test_hundred_runs_keep_the_history_to_one_iteration(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(counter, Loop(0, 100))
    await runtime.run_until_idle()
    result = await handle.result(timeout=30)
    assert result["total"] == sum(range(100))
    runs = await handle.runs()
    assert [r.run_no for r in runs] == list(range(1, 101))
    assert runs[0].run_id == handle.id  # the first run's id is the execution id
    assert len({r.run_id for r in runs}) == 100
    assert runs[-1].current
    assert str(runs[-1].run_id) == result["run_id"]
    # one iteration: ActivityScheduled, ActivityCompleted, then the run's end
    assert {r.events for r in runs[:-1]} == {3}
    assert runs[-1].events == 3
    assert [type(e.event).__name__ for e in await handle.history()] == [
        "ActivityScheduled",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]
    first = [type(e.event).__name__ for e in await handle.history(run_no=1)]
    assert first[-1] == "WorkflowContinuedAsNew"
    view = await handle.describe()
    assert view.run_no == 100
    assert view.history_events == 3
    assert not view.history_limit_exceeded


async def test_signals_buffered_for_the_old_run_carry_over_none_lost_none_doubled(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(inbox, [])
    for i in range(5):
        assert await handle.signal("item", f"m{i}", message_id=f"id{i}")
    assert await handle.signal("item", "stop", message_id="stop")
    await runtime.run_until_idle()
    assert await handle.result(timeout=10) == ["m0", "m1", "m2", "m3", "m4", "stop"]
    assert not await handle.signal("item", "m0", message_id="id0")  # dedupe across runs
    assert len(await handle.runs()) == 6
    assert (await handle.describe()).signals_undelivered == 0


async def test_the_final_run_ends_with_the_execution_whichever_way_it_ends(
    store: PostgresStore, runtime: LocalRuntime, cmd: Cmd
) -> None:
    done = await Client(store).start(inbox, [])
    await done.signal("item", "a")
    await runtime.run_until_idle()
    live = (await done.runs())[-1]
    assert (live.ended_at, live.state) == (None, WorkflowState.RUNNING)
    await done.signal("item", "stop")
    await runtime.run_until_idle()
    stopped = await Client(store).start(inbox, [])
    await stopped.signal("item", "a")
    await runtime.run_until_idle()
    await stopped.terminate("closing the account")
    for handle, state in ((done, "succeeded"), (stopped, "terminated")):
        view = await handle.describe()
        first, final = await handle.runs()
        assert (first.state, first.current) == ("continued_as_new", False)
        assert (final.state, final.current) == (state, True)
        assert final.ended_at is not None
        assert final.ended_at == view.completed_at
    shown = (await cmd("workflows", "show", str(done.id), "--json")).json
    assert [(r["state"], r["ended_at"] is None) for r in shown["runs"]] == [
        ("continued_as_new", False),
        ("succeeded", False),
    ]


async def test_result_waiter_follows_the_chain_to_the_final_run(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(inbox, [])
    await handle.signal("item", "a")
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.RUNNING
    await handle.signal("item", "stop")
    await runtime.run_until_idle()
    assert await handle.result(timeout=10) == ["a", "stop"]


async def test_children_of_a_run_get_their_policy_when_it_continues_as_new(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    client = Client(store)
    handle = await client.start(renewing_parent, 0)
    await runtime.run_until_idle()
    first, second = await store.list_child_workflows(handle.id)
    assert first.state == WorkflowState.TERMINATED  # its parent run ended
    assert second.state == WorkflowState.RUNNING
    assert first.parent_run_id == handle.id
    assert second.parent_run_id != handle.id
    await handle.signal("end")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "done"
    assert (await client.get_handle(second.id).describe()).state == WorkflowState.TERMINATED


async def test_an_archived_run_replays_against_the_code(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(counter, Loop(0, 2))
    await runtime.run_until_idle()
    await handle.result(timeout=5)
    rows = await store.list_run_history(handle.id, 1)
    verdict = Replayer(WORKFLOWS).replay(
        rows, workflow_name="counter", input_bytes=msgspec.json.encode(Loop(0, 2))
    )
    assert verdict.ok, verdict.error


async def test_history_past_the_limit_is_flagged_and_logged(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    limit = HistoryLimit(warn_events=4)
    runtime = LocalRuntime(store, Registry(WORKFLOWS, [add]), history_limit=limit)
    handle = await Client(store, history_limit=limit).start(chatty, 3)
    with caplog.at_level(logging.WARNING, logger="azync_flow.workflow"):
        await runtime.run_until_idle()
    view = await handle.describe()
    assert view.history_events == 6  # three activities, each scheduled and completed
    assert view.history_bytes is not None
    assert view.history_bytes > 0
    assert view.history_limit_exceeded
    warnings = [r.getMessage() for r in caplog.records if "history limit" in r.getMessage()]
    assert len(warnings) == 1
    assert str(handle.id) in warnings[0]
    # the default thresholds (10,000 events / 10 MiB) are far away
    assert not (await Client(store).get_handle(handle.id).describe()).history_limit_exceeded


async def test_vacuum_drops_earlier_runs_past_retention_and_keeps_the_execution(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    handle = await Client(store).start(inbox, [])
    await handle.signal("item", "a")
    await runtime.run_until_idle()
    assert len(await handle.runs()) == 2  # run 1 archived, run 2 waiting
    assert await store.vacuum_workflows(timedelta(days=7)) == 0
    assert len(await handle.runs()) == 2  # not old enough
    clock.advance(timedelta(days=8))
    assert await store.vacuum_workflows(timedelta(days=7)) == 0  # the execution is live
    runs = await handle.runs()
    assert [r.run_no for r in runs] == [2]
    with pytest.raises(NotFoundError):
        await handle.history(run_no=1)
    await handle.signal("item", "stop")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == ["a", "stop"]
