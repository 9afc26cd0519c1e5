"""Reset end to end on a real PostgreSQL and real workers: a run that failed
because of a bug is reset after the fix and completes, with the activities
before the point run exactly once in total; a running run is reset and ended;
signals consumed after the point are delivered again in their order; the old
run stays for audit, linked both ways; the CLI does the same."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import ActivityError, WorkflowFailedError
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]

#: Calls of each activity, counted by the activities themselves (the workers
#: run in this process).
CALLS: collections.Counter[str] = collections.Counter()
#: The activity bug: while True, rs_ship raises.
BROKEN = {"ship": True}


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    CALLS.clear()
    BROKEN["ship"] = True


@activity(name="rs_reserve")
def reserve(order: str) -> str:
    CALLS["reserve"] += 1
    return f"reserved {order}"


@activity(name="rs_charge")
def charge(order: str) -> str:
    CALLS["charge"] += 1
    return f"charged {order}"


@activity(name="rs_ship", retry=RetryPolicy(maximum_attempts=1))
def ship(order: str) -> str:
    CALLS["ship"] += 1
    if BROKEN["ship"]:
        raise RuntimeError("the carrier code is wrong")
    return f"shipped {order}"


@workflow(name="rs_order", version="buggy")
async def order_buggy(ctx: WorkflowContext, order: str) -> list[str]:
    done = [await reserve(order), await charge(order)]
    raise ValueError(f"bug: forgot to ship {done}")


@workflow(name="rs_order", version="fixed")
async def order_fixed(ctx: WorkflowContext, order: str) -> list[str]:
    done = [await reserve(order), await charge(order)]
    return [*done, await ship(order)]


@workflow(name="rs_gate")
async def gate(ctx: WorkflowContext, order: str) -> list[str]:
    first = await reserve(order)
    go = await ctx.wait_signal("go")
    return [first, go, await charge(order)]


@workflow(name="rs_inbox")
async def inbox(ctx: WorkflowContext, order: str) -> list[Any]:
    got = [await ctx.wait_signal("item")]
    got.append(await reserve(order))
    got.append(await ctx.wait_signal("item"))
    got.append(await ctx.wait_signal("item"))
    return got


ACTIVITIES = [reserve, charge, ship]


def _runtime(store: PostgresStore, *workflows: Any, cache: int = 1000) -> LocalRuntime:
    return LocalRuntime(store, Registry(list(workflows), ACTIVITIES), cache_size=cache)


def _types(history: list[Any]) -> list[str]:
    return [type(e.event).__name__ for e in history]


@pytest.mark.parametrize("cache", [1000, 0], ids=["sticky", "full"])
async def test_a_run_failed_by_a_code_bug_is_reset_after_the_fix_and_completes(
    store: PostgresStore, cache: int
) -> None:
    client = Client(store)
    handle = await client.start("rs_order", "o-1")
    await _runtime(store, order_buggy, cache=cache).run_until_idle()
    with pytest.raises(WorkflowFailedError, match="forgot to ship"):
        await handle.result(timeout=30)
    BROKEN["ship"] = False
    reset = await handle.reset(to="first_failure", reason="shipping added")
    assert (reset.run_no, reset.kept, reset.previous_state) == (2, 4, WorkflowState.FAILED)
    assert reset.rerun_activities == 0
    await _runtime(store, order_fixed, cache=cache).run_until_idle()
    assert await handle.result(timeout=30) == ["reserved o-1", "charged o-1", "shipped o-1"]
    assert CALLS == {"reserve": 1, "charge": 1, "ship": 1}  # the kept ones never ran again
    view = await handle.describe()
    assert (view.run_no, view.reset_from_run, view.reset_seq) == (2, 1, 4)
    assert view.reset_reason == "shipping added"
    old, new = await handle.runs()
    assert (old.state, old.state_at_reset, old.reset_seq) == ("reset", "failed", 4)
    assert old.reset_reason == "shipping added"
    assert (new.state, new.run_id, new.current) == ("succeeded", reset.run_id, True)
    assert _types(await handle.history(run_no=1))[-1] == "WorkflowFailed"  # kept for audit
    assert _types(await handle.history())[:4] == _types(await handle.history(run_no=1))[:4]


async def test_a_run_failed_by_an_activity_bug_reruns_only_that_activity_after_reset(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handle = await client.start("rs_order", "o-2")
    runtime = _runtime(store, order_fixed)
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError, match="carrier code"):
        await handle.result(timeout=30)
    assert CALLS == {"reserve": 1, "charge": 1, "ship": 1}
    BROKEN["ship"] = False
    reset = await handle.reset(to="first_failure", reason="carrier code fixed")
    assert reset.rerun_activities == 1  # ship was scheduled before the point, failed after
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == ["reserved o-2", "charged o-2", "shipped o-2"]
    assert CALLS == {"reserve": 1, "charge": 1, "ship": 2}


async def test_resetting_a_running_run_ends_it_and_the_new_run_carries_on(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handle = await client.start(gate, "o-3")
    runtime = _runtime(store, gate)
    await runtime.run_until_idle()
    assert (await handle.describe()).awaited_signals == ["go"]
    reset = await handle.reset(2, reason="operator retry")  # after reserve completed
    assert reset.previous_state == WorkflowState.RUNNING
    old, new = await handle.runs()
    assert (old.state, old.state_at_reset, old.ended_at is not None) == ("reset", "running", True)
    assert new.state == WorkflowState.RUNNING
    await runtime.run_until_idle()
    assert (await handle.describe()).awaited_signals == ["go"]
    assert await handle.signal("go", "now")
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == ["reserved o-3", "now", "charged o-3"]
    assert CALLS == {"reserve": 1, "charge": 1}


async def test_signals_consumed_after_the_point_are_delivered_again_in_their_order(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handle = await client.start(inbox, "o-4")
    runtime = _runtime(store, inbox)
    await handle.signal("item", "first")
    await runtime.run_until_idle()
    await handle.signal("item", "second")
    await handle.signal("item", "third")
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == ["first", "reserved o-4", "second", "third"]
    history = await handle.history()
    completed = _types(history).index("ActivityCompleted") + 1
    reset = await handle.reset(completed, reason="replay the tail")
    assert reset.redelivered_signals == 2
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == ["first", "reserved o-4", "second", "third"]
    assert CALLS == {"reserve": 1}
    again = await handle.reset(0, reason="from the start")
    assert again.redelivered_signals == 3
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == ["first", "reserved o-4", "second", "third"]
    assert CALLS == {"reserve": 2}  # nothing kept: the activity ran again
    assert [r.state for r in await handle.runs()] == ["reset", "reset", "succeeded"]


async def test_bad_reset_points_are_refused_and_nothing_changes(store: PostgresStore) -> None:
    client = Client(store)
    handle = await client.start(gate, "o-5")
    await _runtime(store, gate).run_until_idle()
    for kwargs, message in (
        ({}, "exactly one reset point"),
        ({"to_seq": 99}, "to_seq must be a seq"),
        ({"to_seq": -1}, "to_seq must be a seq"),
        ({"to": "first_failure"}, "no failure"),
        ({"to_seq": 1, "to": "last_task"}, "exactly one reset point"),
    ):
        with pytest.raises(ValueError, match=message):
            await handle.reset(reason="x", **kwargs)
    assert len(await handle.runs()) == 1


async def test_cli_reset_shows_the_link_and_refuses_bad_points(
    cmd: Cmd, store: PostgresStore
) -> None:
    client = Client(store)
    handle = await client.start("rs_order", "o-6")
    await _runtime(store, order_buggy).run_until_idle()
    with pytest.raises(WorkflowFailedError):
        await handle.result(timeout=30)
    got = await cmd("workflows", "reset", str(handle.id), "--first-failure", "--reason",
                    "shipping added", "--json")  # fmt: skip
    assert got.code == 0, got.err
    assert (got.json["run_no"], got.json["kept"], got.json["previous_state"]) == (2, 4, "failed")
    shown = await cmd("workflows", "show", str(handle.id))
    assert "reset from" in shown.out
    assert "run 1 at seq 4: shipping added" in shown.out
    assert "reset at seq 4 while failed" in shown.out
    BROKEN["ship"] = False
    await _runtime(store, order_fixed).run_until_idle()
    assert (await handle.result(timeout=30))[-1] == "shipped o-6"
    wid = str(handle.id)
    for argv in (
        ("workflows", "reset", wid, "--reason", "x"),
        ("workflows", "reset", wid, "--to-seq", "1", "--last-task", "--reason", "x"),
        ("workflows", "reset", wid, "--to-seq", "999", "--reason", "x"),
    ):
        bad = await cmd(*argv)
        assert bad.code == 2, (argv, bad.out, bad.err)
        assert bad.err.startswith("azync-flow: error: ")


async def test_a_reset_whose_point_leaves_an_activity_error_unseen_raises_it_again(
    store: PostgresStore,
) -> None:
    """Keeping the ActivityFailed event replays the failure: the fixed code
    must handle it (here it does not, so the new run fails the same way)."""
    handle = await Client(store).start("rs_order", "o-7")
    runtime = _runtime(store, order_fixed)
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError):
        await handle.result(timeout=30)
    history = await handle.history()
    failed = _types(history).index("ActivityFailed") + 1
    await handle.reset(failed, reason="keep the failure")
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as err:
        await handle.result(timeout=30)
    assert err.value.error_type == ActivityError.__name__
    assert CALLS["ship"] == 1
