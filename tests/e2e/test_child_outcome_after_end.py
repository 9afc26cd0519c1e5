"""A pass that starts a child whose id is taken and returns in the same pass: the
code never sees that outcome, so it is not a ``ChildFailed`` after the terminal
event but a ``ChildrenNotStarted`` record (like ``SignalsUndelivered``); the
terminal event is the last event the code produced and replay is unaffected."""

from __future__ import annotations

import uuid

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.replay import ChildrenNotStarted, Replayer
from azync_flow.replay.events import TERMINAL_TYPES
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@workflow(name="cae_kid")
async def cae_kid(ctx: WorkflowContext, label: str) -> str:
    await ctx.wait_signal("go")
    return label


@workflow(name="cae_parent")
async def cae_parent(ctx: WorkflowContext, child_id: str) -> str:
    await ctx.start_child(cae_kid, "mine", id=uuid.UUID(child_id), parent_close_policy="abandon")
    return "left"


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["sticky", "full"])
async def test_a_taken_child_id_in_a_pass_that_returns_is_recorded_after_the_end_as_a_record(
    store: PostgresStore, cache_size: int
) -> None:
    runtime = LocalRuntime(store, Registry([cae_kid, cae_parent], []), cache_size=cache_size)
    client = Client(store)
    other = await client.start(cae_kid, "other")
    handle = await client.start(cae_parent, str(other.id))
    await runtime.run_until_idle()
    assert await handle.result(timeout=10) == "left"
    history = await handle.history()
    types = [type(e.event).__name__ for e in history]
    end = max(i for i, t in enumerate(types) if t in TERMINAL_TYPES)
    assert types[end] == "WorkflowCompleted"
    assert "ChildFailed" not in types
    after = [e.event for e in history[end + 1 :]]
    assert [type(e).__name__ for e in after] == ["ChildrenNotStarted"]
    (record,) = after
    assert isinstance(record, ChildrenNotStarted)
    (child,) = record.children
    assert child.workflow_id == str(other.id)
    assert child.error_type == "WorkflowAlreadyStarted"
    started = next(e for e in history if type(e.event).__name__ == "ChildStarted")
    assert child.started_seq == started.seq
    assert (await other.describe()).state == WorkflowState.RUNNING
    verdict = Replayer([cae_parent]).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error  # the record changes nothing on replay
