"""The workflow runtime on a real Worker: spans per attempt (SpanCapture), the run
events, suppressed workflow code, context propagation into activities, no
duplicate spans after replay — in both cache modes; Client.list and
handle.result waking on NOTIFY."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry import trace

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.retry import RetryPolicy
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import RunTracer, run_span_id
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture, nesting_violations, parent_id
from azync_flow.worker import Worker
from azync_flow.workflow import Registry, WorkflowContext
from tests.store.workflow_helpers import finish

SEEN: dict[str, Any] = {}
CAPTURE = SpanCapture(service_name="wf-test")
USER = CAPTURE.provider.get_tracer("user-code")


@activity(name="t_reserve")
def t_reserve(order: str) -> str:
    SEEN["reserve_span"] = trace.get_current_span().get_span_context().span_id
    with USER.start_as_current_span("POST /reserve"):
        pass
    return f"reserved {order}"


@activity(name="t_charge")
async def t_charge(order: str) -> str:
    SEEN["charge_calls"] = SEEN.get("charge_calls", 0) + 1
    SEEN.setdefault("charge_spans", []).append(trace.get_current_span().get_span_context().span_id)
    if SEEN["charge_calls"] == 1:
        raise ConnectionError("gateway hiccup")
    return f"charged {order}"


@workflow(name="t_order")
async def t_order(ctx: WorkflowContext, order: str) -> list[str]:
    with USER.start_as_current_span("inside workflow code"):  # must be suppressed
        first = await t_reserve(order)
    second = await t_charge.with_options(
        retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(0), jitter=0)
    )(order)
    go = await ctx.wait_signal("go")
    await ctx.sleep(timedelta(milliseconds=10))
    return [first, second, go]


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def worker_for(store: PostgresStore, cache_size: int) -> tuple[Worker, Any]:
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=50),
        maintain=(),
        handle_signals=False,
    )
    runtime = attach_workflows(
        worker,
        [t_order],
        [t_reserve, t_charge],
        cache_size=cache_size,
        tracer_provider=CAPTURE.provider,
    )
    return worker, runtime


async def test_span_tree_of_a_workflow_run_one_span_per_attempt(
    store: PostgresStore, cache_size: int
) -> None:
    CAPTURE.clear()
    SEEN.clear()
    worker, runtime = worker_for(store, cache_size)
    client = Client(store, tracer_provider=CAPTURE.provider)
    handle = await client.start(t_order, "o1")
    await worker.run_until_idle()
    await handle.signal("go", "yes")
    async with worker:
        assert await handle.result(timeout=10) == ["reserved o1", "charged o1", "yes"]
    await client.close()

    # one run span, exported once, covering the run: every attempt nests inside it
    [run] = CAPTURE.named("workflow t_order")
    assert run.context.span_id == run_span_id(handle.id)
    assert run.parent is None
    assert run.attributes["azync.state"] == "succeeded"
    view = await handle.describe()
    assert run.start_time == int(view.created_at.timestamp() * 1e6) * 1000
    spans = CAPTURE.spans()
    assert nesting_violations(spans) == []
    assert {s.context.trace_id for s in spans if s.name != "POST /reserve"} == {
        run.context.trace_id
    }
    # every attempt and run event is a child of the run span, whichever pass made it
    for s in spans:
        if s.name.startswith(("workflow.task", "activity", "signal", "timer.fired")):
            assert parent_id(s) == run.context.span_id, s.name
    # the run span is the last span to end
    assert max(s.end_time for s in spans) == run.end_time
    # one span per attempt: the retried charge has two, with outcomes
    charges = CAPTURE.named("activity t_charge")
    assert [s.attributes["azync.outcome"] for s in charges] == ["retried", "succeeded"]
    assert charges[0].attributes["azync.retry_delay_s"] == 0.0
    assert charges[0].status.status_code.name == "ERROR"
    assert [s.attributes["azync.attempt"] for s in charges] == [1, 2]
    # replay (full mode replays everything each pass) makes no duplicate spans
    assert len(CAPTURE.named("activity t_reserve")) == 1
    passes = CAPTURE.named("workflow.task t_order")
    assert len(passes) == runtime.workflows.passes
    # the completing pass has its span: it wrote the WorkflowCompleted event
    [completed] = [
        e for e in await handle.history() if type(e.event).__name__ == "WorkflowCompleted"
    ]
    assert max(
        p.attributes["azync.seq"] + p.attributes["azync.new_commands"] - 1 for p in passes
    ) == (completed.seq)
    assert all(p.attributes["azync.outcome"] == "succeeded" for p in passes)
    replayed = [p.attributes["azync.events_replayed"] for p in passes]
    if cache_size == 0:
        assert replayed == sorted(replayed)
        assert replayed[-1] > replayed[0]
    # workflow code emits nothing, even live
    assert CAPTURE.named("inside workflow code") == []
    # the activity ran inside its attempt span; its own spans nest under it
    [reserve] = CAPTURE.named("activity t_reserve")
    assert SEEN["reserve_span"] == reserve.context.span_id
    [user_span] = CAPTURE.named("POST /reserve")
    assert parent_id(user_span) == reserve.context.span_id
    assert SEEN["charge_spans"] == [s.context.span_id for s in charges]
    # run events
    assert len(CAPTURE.named("signal go")) == 1
    assert len(CAPTURE.named("timer.fired")) == 1


async def test_cancellation_is_a_run_event(store: PostgresStore) -> None:
    CAPTURE.clear()
    worker, _ = worker_for(store, 1000)
    client = Client(store, tracer_provider=CAPTURE.provider)
    handle = await client.start(t_order, "o2")
    SEEN.clear()
    await worker.run_until_idle()  # waits for "go"
    await handle.cancel()
    await worker.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.CANCELLED
    [event] = CAPTURE.named("cancel.requested")
    [run] = CAPTURE.named("workflow t_order")
    assert parent_id(event) == run.context.span_id
    assert run.attributes["azync.state"] == "cancelled"
    assert run.status.status_code.name == "UNSET"
    assert nesting_violations(CAPTURE.spans()) == []


@workflow(name="t_quick")
async def t_quick(ctx: WorkflowContext, n: int) -> int:
    return n * 2


@workflow(name="t_waits")
async def t_waits(ctx: WorkflowContext, n: int) -> int:
    return int(await ctx.wait_signal("go")) + n


async def test_list_filters_by_name_and_state_newest_first_in_pages(
    store: PostgresStore,
) -> None:
    client = Client(store)
    quick = [await client.start(t_quick, i) for i in range(5)]
    waiting = [await client.start(t_waits, i) for i in range(2)]
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, [t_quick, t_waits], [])
    await worker.run_until_idle()

    page = await client.list(t_quick, limit=2)
    ids = [e.id for e in page.executions]
    assert ids == [quick[4].id, quick[3].id]
    assert page.next_cursor is not None
    page2 = await client.list("t_quick", limit=2, cursor=page.next_cursor)
    assert [e.id for e in page2.executions] == [quick[2].id, quick[1].id]
    page3 = await client.list("t_quick", limit=2, cursor=page2.next_cursor)
    assert [e.id for e in page3.executions] == [quick[0].id]
    assert page3.next_cursor is None
    running = await client.list(state="running")
    assert [e.id for e in running.executions] == [waiting[1].id, waiting[0].id]
    done = await client.list(state=WorkflowState.SUCCEEDED, limit=100)
    assert {e.id for e in done.executions} == {h.id for h in quick}
    everything = await client.list(limit=100)
    assert len(everything.executions) == 7
    with pytest.raises(ValueError):
        await client.list(state="sleeping")
    for limit in (0, -5):  # not an empty page: the caller asked for nothing
        with pytest.raises(ValueError, match="limit"):
            await client.list(limit=limit)


async def test_result_wakes_on_the_terminal_notify_not_by_polling(store: PostgresStore) -> None:
    # fallback re-read every 30 s: only the NOTIFY can end the wait quickly;
    # no linger: the LISTEN connection closes with the last waiter
    client = Client(store, fallback_poll=timedelta(seconds=30), listen_linger=timedelta(0))
    handle = await client.start(t_waits, 1)
    worker = Worker(store, poll_interval=timedelta(seconds=30), maintain=(), handle_signals=False)
    attach_workflows(worker, [t_waits], [])
    async with worker:
        waiter = asyncio.create_task(handle.result(timeout=20))
        await asyncio.sleep(0.2)
        assert not waiter.done()
        began = time.monotonic()
        await handle.signal("go", 41)
        assert await waiter == 42
        assert time.monotonic() - began < 5
    assert client.wakeups >= 1
    assert client._waits.watcher.sub is None  # the LISTEN connection closed with the last waiter
    assert await handle.result(timeout=1) == 42  # finished: answered without listening
    assert client._waits.watcher.sub is None


class HeldCommitStore:
    """The real store, with each pass commit held until ``release`` is set."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit_pass(self, *args: Any, **kwargs: Any) -> Any:
        self.reached.set()
        await self.release.wait()
        return await self._store.commit_pass(*args, **kwargs)


async def test_run_span_is_exported_once_by_the_pass_whose_completion_commit_won(
    store: PostgresStore, clock: MovableClock
) -> None:
    """Worker A's completing pass stalls before its commit; its lease expires, worker
    B re-runs the task and completes the run. A's late commit is refused: only B
    exports the run span, and A's own (losing) pass span exports no run span."""
    cap_a, cap_b = SpanCapture("worker-a"), SpanCapture("worker-b")
    clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    handle = await Client(store, tracer_provider=SpanCapture("api").provider).start(t_quick, 21)
    registry = Registry([t_quick], [])
    held = HeldCommitStore(store)
    runner_a = WorkflowRunner(held, registry, tracer=RunTracer(cap_a.provider))
    runner_b = WorkflowRunner(store, registry, tracer=RunTracer(cap_b.provider))
    [task] = [t.job for t in await store.lease_workflow_tasks(1, timedelta(seconds=30))]
    assert task.lease_token is not None
    stalled = asyncio.create_task(runner_a.run_task(task, task.lease_token))
    await held.reached.wait()
    clock.advance(timedelta(seconds=31))  # A looks dead: its lease expires
    assert (await store.reap_workflow_tasks()).reaped == 1
    [again] = [t.job for t in await store.lease_workflow_tasks(1, timedelta(seconds=30))]
    assert again.lease_token is not None
    await runner_b.run_task(again, again.lease_token)
    assert await handle.result(timeout=5) == 42
    held.release.set()
    # the fence refuses A's commit: its pass writes nothing and reports no outcome
    assert await stalled is None
    assert runner_a.passes == 0
    [run] = cap_b.named("workflow t_quick")
    assert run.attributes["azync.state"] == "succeeded"
    assert cap_a.named("workflow t_quick") == []
    assert [s.name for s in cap_a.spans()] == ["workflow.task t_quick"]


async def test_cancel_of_a_suspended_run_ends_it_and_exports_the_run_span(
    store: PostgresStore,
) -> None:
    cap = SpanCapture()
    client = Client(store, tracer_provider=cap.provider)
    handle = await client.start(t_waits, 1)
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(worker, [t_waits], [], tracer_provider=cap.provider)
    await worker.run_until_idle()  # waits for "go"
    await finish(store, handle.id, ("suspend", "held by an operator"))  # as a pass would
    await handle.cancel()  # a suspended run cannot run code: settled here, no pass
    assert (await handle.describe()).state == WorkflowState.CANCELLED
    [run] = cap.named("workflow t_waits")
    assert (run.context.span_id, run.attributes["azync.state"]) == (
        run_span_id(handle.id),
        "cancelled",
    )
    assert nesting_violations(cap.spans()) == []
    await worker.run_until_idle()  # nothing left to run: no second run span
    assert len(cap.named("workflow t_waits")) == 1
