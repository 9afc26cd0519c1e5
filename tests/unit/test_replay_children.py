"""Replay of the child-workflow and continue-as-new events, without a database,
in both cache modes (``full``: a fresh instance replays the whole history each
pass; ``sticky``: one instance fed only new events): ChildStarted,
ChildCompleted, ChildFailed, ChildSignaled and WorkflowContinuedAsNew drive the
same code the same way, and a changed child call is a NonDeterminismError."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
import pytest

from azync_flow import workflow
from azync_flow.errors import ChildWorkflowError, NonDeterminismError
from azync_flow.replay import PassStatus, WorkflowInfo, run_pass
from azync_flow.replay.events import ChildCompleted, ChildFailed, ChildStarted
from azync_flow.replay.outcome import CancelChild, SignalChild, StartChild
from azync_flow.workflow import WorkflowContext

from .test_replay_sim import Sim


@workflow(name="leaf")
async def leaf(ctx: WorkflowContext, x: int) -> int:
    return x


@workflow(name="other_leaf")
async def other_leaf(ctx: WorkflowContext, x: int) -> int:
    return x


@workflow(name="fan_out")
async def fan_out(ctx: WorkflowContext, n: int) -> dict[str, Any]:
    handles = [await ctx.start_child(leaf, i) for i in range(n)]
    await handles[0].signal("poke", {"n": n})
    results: list[Any] = []
    for outcome in await asyncio.gather(*(h.result() for h in handles), return_exceptions=True):
        if isinstance(outcome, ChildWorkflowError):
            results.append(f"{outcome.state}:{outcome.error_type}:{outcome.message}")
        else:
            results.append(outcome)
    return {"results": results, "ids": [str(h.id) for h in handles], "r": ctx.random()}


@workflow(name="stopper")
async def stopper(ctx: WorkflowContext) -> str:
    handle = await ctx.start_child(leaf, 1)
    await handle.cancel()
    try:
        return str(await handle.result())
    except ChildWorkflowError as err:
        return err.state


@workflow(name="renew")
async def renew(ctx: WorkflowContext, i: int) -> int:
    await ctx.start_child(leaf, i)
    if i < 3:
        ctx.continue_as_new(i + 1)
    return i


def _finish_children(sim: Sim, fail: set[int]) -> None:
    for entry in list(sim.history):
        event = entry.event
        if not isinstance(event, ChildStarted):
            continue
        x = msgspec.json.decode(bytes(event.input))
        if x in fail:
            sim.append(
                ChildFailed(
                    started_seq=entry.seq,
                    workflow_id=event.workflow_id,
                    state="failed",
                    error_type="ValueError",
                    message=f"bad {x}",
                )
            )
        else:
            sim.append(
                ChildCompleted(
                    started_seq=entry.seq,
                    workflow_id=event.workflow_id,
                    result=msgspec.Raw(msgspec.json.encode(x * 10)),
                )
            )


@pytest.mark.parametrize("mode", ["full", "sticky"])
def test_children_results_failures_and_signals_replay_identically(mode: str) -> None:
    sim = Sim(fan_out, 3, mode=mode)
    first = sim.run_pass()
    assert first.status is PassStatus.BLOCKED
    starts = [c for c in first.commands if isinstance(c, StartChild)]
    assert [c.seq for c in starts] == [1, 2, 3]
    # derived ids: from the run id and the seq, the same on every replay
    assert starts[0].workflow_id == uuid.uuid5(sim.info.current_run_id, "child/1")
    (signal,) = [c for c in first.commands if isinstance(c, SignalChild)]
    assert signal.workflow_id == starts[0].workflow_id
    assert signal.message_id == f"{sim.info.current_run_id}/4"
    assert sim.types() == ["ChildStarted"] * 3 + ["ChildSignaled"]
    _finish_children(sim, fail={1})
    done = sim.run_pass()
    assert done.status is PassStatus.COMPLETED
    result = sim.result()
    assert result["results"] == [0, "failed:ValueError:bad 1", 20]
    assert result["ids"] == [str(c.workflow_id) for c in starts]
    # a fresh full replay of the finished history agrees with the outcome
    again = run_pass(fan_out, sim.input, sim.history[:-1], info=sim.info)
    assert again.status is PassStatus.COMPLETED
    assert msgspec.json.decode(again.result or b"") == result


@pytest.mark.parametrize("mode", ["full", "sticky"])
def test_continue_as_new_ends_the_run_with_the_new_input_and_run_id(mode: str) -> None:
    sim = Sim(renew, 0, mode=mode)
    outcome = sim.run_pass()
    assert outcome.status is PassStatus.CONTINUED_AS_NEW
    assert sim.types() == ["ChildStarted", "WorkflowContinuedAsNew"]
    assert outcome.continued is not None
    new_run, new_input = outcome.continued
    assert new_input == b"1"
    assert new_run == uuid.uuid5(sim.info.current_run_id, "continue-as-new/2")
    # replaying the ended run reaches the same end and names the same run
    again = run_pass(renew, sim.input, sim.history, info=sim.info)
    assert again.status is PassStatus.CONTINUED_AS_NEW
    assert again.continued == outcome.continued
    # the next run: its own run id seeds the child ids
    info = WorkflowInfo(sim.info.execution_id, "renew", run_id=new_run)
    nxt = run_pass(renew, new_input, [], info=info)
    (start,) = [c for c in nxt.commands if isinstance(c, StartChild)]
    assert start.workflow_id == uuid.uuid5(new_run, "child/1")


def test_the_last_run_completes() -> None:
    info = WorkflowInfo(uuid.UUID(int=7), "renew", run_id=uuid.UUID(int=8))
    outcome = run_pass(renew, b"3", [], info=info)
    assert outcome.status is PassStatus.COMPLETED


@pytest.mark.parametrize("mode", ["full", "sticky"])
def test_a_changed_child_workflow_is_nondeterminism(mode: str) -> None:
    sim = Sim(fan_out, 1, mode=mode)
    sim.run_pass()

    @workflow(name="fan_out")
    async def changed(ctx: WorkflowContext, n: int) -> int:
        return await ctx.execute_child(other_leaf, n)

    outcome = run_pass(changed, sim.input, sim.history, info=sim.info)
    assert outcome.status is PassStatus.NONDETERMINISM
    assert isinstance(outcome.error, NonDeterminismError)
    assert "ChildStarted(leaf" in str(outcome.error)


def test_unknown_parent_close_policy_fails_the_workflow_with_a_clear_error() -> None:
    @workflow(name="bad_policy")
    async def bad(ctx: WorkflowContext) -> None:
        await ctx.start_child(leaf, 1, parent_close_policy="explode")  # type: ignore[arg-type]

    outcome = run_pass(bad, b"null", [], info=WorkflowInfo(uuid.UUID(int=1), "bad_policy"))
    assert outcome.status is PassStatus.FAILED
    assert "parent_close_policy must be one of terminate" in outcome.failure_reason


@pytest.mark.parametrize("mode", ["full", "sticky"])
def test_a_cancel_request_to_a_child_is_a_recorded_command(mode: str) -> None:
    sim = Sim(stopper, None, mode=mode)
    first = sim.run_pass()
    (cancel,) = [c for c in first.commands if isinstance(c, CancelChild)]
    (start,) = [c for c in first.commands if isinstance(c, StartChild)]
    assert cancel.workflow_id == start.workflow_id
    assert sim.types() == ["ChildStarted", "ChildCancelRequested"]
    sim.append(
        ChildFailed(
            started_seq=1,
            workflow_id=str(start.workflow_id),
            state="cancelled",
            error_type="WorkflowCancelled",
        )
    )
    sim.run_pass()
    assert sim.result() == "cancelled"
