"""Child workflows end to end on a real PostgreSQL and a real Worker, in both
cache modes: start, result, failure, gather, signals to a child, parent-close
policies, id conflicts, listing and replay."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import ChildWorkflowError, WorkflowFailedError
from azync_flow.replay import Replayer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import run_span_id
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@activity(name="double")
def double(x: int) -> int:
    return 2 * x


@workflow(name="kid")
async def kid(ctx: WorkflowContext, x: int) -> int:
    if x < 0:
        raise ValueError(f"negative input {x}")
    return await double(x)


@workflow(name="waiting_kid")
async def waiting_kid(ctx: WorkflowContext, label: str) -> str:
    got = await ctx.wait_signal("go")
    return f"{label}:{got}"


@workflow(name="parent_one")
async def parent_one(ctx: WorkflowContext, x: int) -> int:
    return await ctx.execute_child(kid, x) + 1


@workflow(name="parent_gather")
async def parent_gather(ctx: WorkflowContext, n: int) -> list[int]:
    handles = [await ctx.start_child(kid, i) for i in range(n)]
    return list(await asyncio.gather(*(h.result() for h in handles)))


@workflow(name="parent_catches")
async def parent_catches(ctx: WorkflowContext, x: int) -> dict[str, Any]:
    try:
        await ctx.execute_child(kid, x)
    except ChildWorkflowError as err:
        return {"state": err.state, "type": err.error_type, "message": err.message}
    return {"state": "succeeded"}


@workflow(name="parent_signals")
async def parent_signals(ctx: WorkflowContext, label: str) -> str:
    handle = await ctx.start_child(waiting_kid, label)
    await handle.signal("go", "now")
    return await handle.result()


@workflow(name="parent_leaves")
async def parent_leaves(ctx: WorkflowContext, policy: str) -> str:
    handle = await ctx.start_child(waiting_kid, policy, parent_close_policy=policy)  # type: ignore[arg-type]
    await ctx.wait_signal("finish")
    return str(handle.id)


@workflow(name="parent_cancels")
async def parent_cancels(ctx: WorkflowContext, label: str) -> dict[str, Any]:
    handle = await ctx.start_child(cleanup_kid, label)
    await handle.cancel()
    try:
        await handle.result()
    except ChildWorkflowError as err:
        return {"state": err.state, "type": err.error_type}
    return {"state": "succeeded"}


@workflow(name="cleanup_kid")
async def cleanup_kid(ctx: WorkflowContext, label: str) -> str:
    try:
        await ctx.wait_signal("never")
    except asyncio.CancelledError:
        await double(1)  # cleanup still runs activities
        raise
    return label


@workflow(name="parent_waits")
async def parent_waits(ctx: WorkflowContext, label: str) -> str:
    return await ctx.execute_child(waiting_kid, label)


@workflow(name="parent_given_id")
async def parent_given_id(ctx: WorkflowContext, child_id: str) -> int:
    return await ctx.execute_child(kid, 5, id=uuid.UUID(child_id))


WORKFLOWS = [
    kid,
    waiting_kid,
    parent_one,
    parent_gather,
    parent_catches,
    parent_signals,
    parent_leaves,
    parent_given_id,
    parent_waits,
    parent_cancels,
    cleanup_kid,
]


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry(WORKFLOWS, [double]), cache_size=request.param)


async def test_execute_child_returns_the_child_result_and_records_both_events(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_one, 20)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 41
    history = await handle.history()
    types = [type(e.event).__name__ for e in history]
    assert types == ["ChildStarted", "ChildCompleted", "WorkflowCompleted"]
    started = history[0].event
    child = Client(store).get_handle(uuid.UUID(started.workflow_id))  # type: ignore[attr-defined]
    view = await child.describe()
    assert view.state == WorkflowState.SUCCEEDED
    assert view.parent_id == handle.id
    assert view.parent_seq == 1
    assert view.parent_close_policy == "terminate"
    # the derived child id is the same on replay: the recorded history replays
    verdict = Replayer(WORKFLOWS).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error


async def test_a_parent_woken_by_its_child_counts_the_workflow_task_it_gets(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_one, 3)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 7
    rows = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE source = 'workflow' AND kind = '$wft'"
    )
    _, daily = await store.stats(Source.WORKFLOW, "$wft")
    assert sum(d.enqueued for d in daily) == rows


async def test_gather_over_children_collects_every_result_in_order(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_gather, 5)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == [0, 2, 4, 6, 8]
    children = await store.list_child_workflows(handle.id)
    assert len(children) == 5
    assert {c.state for c in children} == {WorkflowState.SUCCEEDED}


async def test_child_failure_surfaces_as_child_workflow_error_with_type_and_message(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_catches, -3)
    await runtime.run_until_idle()
    result = await handle.result(timeout=5)
    assert result == {"state": "failed", "type": "ValueError", "message": "negative input -3"}
    failed = [e.event for e in await handle.history() if type(e.event).__name__ == "ChildFailed"]
    assert len(failed) == 1


async def test_uncaught_child_failure_fails_the_parent_naming_the_child_error(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_one, -1)
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as caught:
        await handle.result(timeout=5)
    assert caught.value.error_type == "ChildWorkflowError"
    assert "ValueError: negative input -1" in caught.value.message


async def test_signal_from_parent_reaches_the_child_once_and_is_recorded(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_signals, "a")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "a:now"
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types[:2] == ["ChildStarted", "ChildSignaled"]
    (child,) = await store.list_child_workflows(handle.id)
    child_types = [
        type(e.event).__name__ for e in await Client(store).get_handle(child.id).history()
    ]
    assert child_types.count("SignalReceived") == 1


@pytest.mark.parametrize(
    ("policy", "child_state"),
    [
        ("terminate", WorkflowState.TERMINATED),
        ("request_cancel", WorkflowState.CANCELLED),
        ("abandon", WorkflowState.RUNNING),
    ],
)
async def test_parent_close_policy_applies_when_the_parent_completes(
    store: PostgresStore, runtime: LocalRuntime, policy: str, child_state: WorkflowState
) -> None:
    client = Client(store)
    handle = await client.start(parent_leaves, policy)
    await runtime.run_until_idle()
    await handle.signal("finish")
    await runtime.run_until_idle()
    child = client.get_handle(uuid.UUID(await handle.result(timeout=5)))
    assert (await child.describe()).state == child_state
    if policy == "abandon":  # still a live execution of its own
        await child.signal("go", "later")
        await runtime.run_until_idle()
        assert await child.result(timeout=5) == "abandon:later"


@pytest.mark.parametrize(
    ("end", "policy", "child_state"),
    [
        ("cancel", "terminate", WorkflowState.TERMINATED),
        ("terminate", "terminate", WorkflowState.TERMINATED),
        ("cancel", "request_cancel", WorkflowState.CANCELLED),
        ("terminate", "abandon", WorkflowState.RUNNING),
    ],
)
async def test_parent_cancel_or_terminate_applies_the_policy_to_live_children(
    store: PostgresStore,
    runtime: LocalRuntime,
    end: str,
    policy: str,
    child_state: WorkflowState,
) -> None:
    client = Client(store)
    handle = await client.start(parent_leaves, policy)
    await runtime.run_until_idle()
    (child,) = await store.list_child_workflows(handle.id)
    assert child.state == WorkflowState.RUNNING
    if end == "cancel":
        await handle.cancel()
    else:
        await handle.terminate("operator stop")
    await runtime.run_until_idle()
    view = await client.get_handle(child.id).describe()
    assert view.state == child_state
    history = await client.get_handle(child.id).history()
    if policy == "terminate":
        assert "parent-close policy terminate" in view.failure_reason
        assert type(history[-1].event).__name__ == "WorkflowTerminated"
    elif policy == "request_cancel":  # the child's code saw the cancel request
        assert "CancelRequested" in [type(e.event).__name__ for e in history]


async def test_child_id_taken_by_another_execution_fails_the_child_call(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    client = Client(store)
    other = await client.start(waiting_kid, "other")
    handle = await client.start(parent_given_id, str(other.id))
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as caught:
        await handle.result(timeout=5)
    assert "WorkflowAlreadyStarted" in caught.value.message
    assert (await other.describe()).state == WorkflowState.RUNNING


async def test_given_child_id_is_used(store: PostgresStore, runtime: LocalRuntime) -> None:
    child_id = uuid.uuid4()
    handle = await Client(store).start(parent_given_id, str(child_id))
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 10
    view = await Client(store).get_handle(child_id).describe()
    assert view.parent_id == handle.id


async def test_child_run_is_traced_in_the_parent_trace_linked_to_the_starting_pass(
    store: PostgresStore,
) -> None:
    capture = SpanCapture()
    runtime = LocalRuntime(store, Registry(WORKFLOWS, [double]), tracer_provider=capture.provider)
    handle = await Client(store, tracer_provider=capture.provider).start(parent_one, 4)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 9
    [parent_run] = capture.named("workflow parent_one")
    [child_run] = capture.named("workflow kid")
    (child,) = await store.list_child_workflows(handle.id)
    assert child_run.context.span_id == run_span_id(child.id)
    assert child_run.context.trace_id == parent_run.context.trace_id
    # the child's run span links to the parent's workflow task that started it
    [link] = child_run.links
    starting = [
        s
        for s in capture.named("workflow.task parent_one")
        if s.context.span_id == link.context.span_id
    ]
    assert len(starting) == 1
    assert starting[0].context.trace_id == parent_run.context.trace_id
    kid_spans = [
        s for s in capture.spans() if s.name.endswith(" kid") or s.name == "activity double"
    ]
    assert {s.context.trace_id for s in kid_spans} == {parent_run.context.trace_id}


async def test_a_parent_waiting_only_on_a_live_child_is_not_stalled(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    client = Client(store)
    handle = await client.start(parent_waits, "w")
    await runtime.run_until_idle()
    clock.advance(timedelta(hours=1))
    (child,) = await store.list_child_workflows(handle.id)
    assert await store.list_stalled_workflows(timedelta(minutes=5), 10) == []
    # once the child is gone (abandoned by an operator's terminate), the parent
    # is woken by its ChildFailed event and finishes
    await client.get_handle(child.id).terminate("stop it")
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as caught:
        await handle.result(timeout=5)
    assert "ChildWorkflowError" in caught.value.error_type


async def test_a_child_terminated_by_its_parents_end_has_its_run_span_exported_once(
    store: PostgresStore,
) -> None:
    capture = SpanCapture()
    runtime = LocalRuntime(store, Registry(WORKFLOWS, [double]), tracer_provider=capture.provider)
    handle = await Client(store, tracer_provider=capture.provider).start(parent_leaves, "terminate")
    await runtime.run_until_idle()
    await handle.signal("finish")
    await runtime.run_until_idle()
    child_id = uuid.UUID(await handle.result(timeout=5))
    for _ in range(500):  # exported right after the parent's commit, off its path
        if capture.named("workflow waiting_kid"):
            break
        await asyncio.sleep(0.01)
    [span] = capture.named("workflow waiting_kid")
    assert span.context.span_id == run_span_id(child_id)
    assert (span.attributes or {})["azync.state"] == "terminated"
    [parent_run] = capture.named("workflow parent_leaves")
    assert span.context.trace_id == parent_run.context.trace_id


async def test_cancel_from_the_parent_reaches_the_child_which_ends_cancelled(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(parent_cancels, "c")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == {"state": "cancelled", "type": "WorkflowCancelled"}
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types[:2] == ["ChildStarted", "ChildCancelRequested"]
    (child,) = await store.list_child_workflows(handle.id)
    assert child.state == WorkflowState.CANCELLED
    child_types = [
        type(e.event).__name__ for e in await Client(store).get_handle(child.id).history()
    ]
    assert "CancelRequested" in child_types
    assert "ActivityCompleted" in child_types  # its cleanup ran
