"""DAG runs in OpenTelemetry: one trace per run, a span per task and compensation
attempt, outcomes, run events, and handler spans nested under their attempt.

The client and the workers use separate SDK providers (as separate processes
would), so a worker's spans join the run's trace only through what the store
carries: the header's trace_context and the carrier in each task's meta.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from azync_flow import attach_dags
from azync_flow.dag import DAG, DAGClient, DAGRunner, DAGScheduler, TaskContext
from azync_flow.errors import NotReady, Skip
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from azync_flow.telemetry import (
    ATTR_ATTEMPT,
    ATTR_DAG_NAME,
    ATTR_KIND,
    ATTR_OUTCOME,
    ATTR_RETRY_DELAY_S,
    ATTR_RUN_ID,
    ATTR_TASK_KEY,
    AttemptOutcome,
    run_span_id,
)
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture, nesting_violations, parent_id
from azync_flow.worker import Worker
from tests.e2e.dag_util import FAST, settle


def _runner(store: PostgresStore, capture: SpanCapture, *dags: DAG) -> DAGRunner:
    return DAGRunner(store, dags, retry=FAST, tracer_provider=capture.provider)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _sid(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _tid(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def _exception(span: ReadableSpan) -> dict[str, Any]:
    [event] = [e for e in span.events if e.name == "exception"]
    return dict(event.attributes or {})


async def test_saga_with_compensation_is_one_trace_under_the_callers_span(
    store: PostgresStore,
) -> None:
    client_cap, worker_cap = SpanCapture("shop"), SpanCapture("worker")
    d = DAG("saga")
    undone: list[str] = []

    async def undo(ctx: TaskContext) -> None:
        undone.append(ctx.compensates)

    @d.task(compensate=undo)
    async def reserve(ctx: TaskContext) -> str:
        return "r-1"

    @d.task(after=[reserve], compensate=undo)
    async def charge(ctx: TaskContext) -> str:
        return "c-1"

    @d.task(after=[charge], max_attempts=1)
    async def ship(ctx: TaskContext) -> None:
        raise RuntimeError("carrier on strike")

    app = client_cap.provider.get_tracer("shop")
    with app.start_as_current_span("POST /order") as caller:
        run = await DAGClient(store, tracer_provider=client_cap.provider).run(d, {"order": 7})
    # the run span is exported when the run ends, not at the start
    assert [s.name for s in client_cap.spans()] == ["POST /order"]
    view = await settle(
        store, _runner(store, worker_cap, d), run.id, tracer_provider=worker_cap.provider
    )
    assert view.state == DAGState.FAILED
    assert undone == ["charge", "reserve"]

    # the scheduler that settled the run exported its span: the whole run, once
    *spans, start = worker_cap.spans()
    assert start.name == "dag saga"
    assert start.parent is None
    assert [link.context.span_id for link in start.links] == [caller.get_span_context().span_id]
    assert _attrs(start)[ATTR_RUN_ID] == str(run.id)
    assert _attrs(start)["azync.state"] == "failed"
    assert start.status.status_code is StatusCode.ERROR
    assert nesting_violations([*client_cap.spans(), *worker_cap.spans()]) == []
    trace_id = caller.get_span_context().trace_id
    assert _tid(start) == trace_id
    assert [s.name for s in spans] == [
        "dag.task reserve",
        "dag.task charge",
        "dag.task ship",
        "dag.compensation charge",
        "dag.compensation reserve",
    ]
    for s in spans:
        assert _tid(s) == trace_id
        assert parent_id(s) == _sid(start)
        a = _attrs(s)
        assert (a[ATTR_RUN_ID], a[ATTR_DAG_NAME], a[ATTR_ATTEMPT]) == (str(run.id), "saga", 1)
    outcomes = {s.name: (_attrs(s)[ATTR_TASK_KEY], _attrs(s)[ATTR_OUTCOME]) for s in spans}
    assert outcomes == {
        "dag.task reserve": ("reserve", "succeeded"),
        "dag.task charge": ("charge", "succeeded"),
        "dag.task ship": ("ship", "dead"),
        "dag.compensation charge": ("comp:charge", "succeeded"),
        "dag.compensation reserve": ("comp:reserve", "succeeded"),
    }
    assert {_attrs(s)[ATTR_KIND] for s in spans[3:]} == {"dag.compensation"}
    ship_span = spans[2]
    assert ship_span.status.status_code is StatusCode.ERROR
    assert ship_span.status.description == "RuntimeError: carrier on strike"
    assert _exception(ship_span)["exception.type"] == "RuntimeError"
    assert all(s.status.status_code is StatusCode.UNSET for s in spans if s is not ship_span)
    # compensation tasks, inserted later, carry the run's carrier read from the header
    carrier = await store.dag_trace_context(run.id)
    assert carrier["traceparent"].split("-")[2] == format(_sid(start), "016x")
    for job in await store.dag_tasks(run.id):
        assert job.meta["traceparent"] == carrier["traceparent"], job.task_key


async def test_retries_make_one_span_per_attempt(store: PostgresStore) -> None:
    cap = SpanCapture()
    d = DAG("retry")
    calls: dict[str, int] = {"flaky": 0, "doomed": 0}

    @d.task(max_attempts=3)
    async def flaky(ctx: TaskContext) -> None:
        calls["flaky"] += 1
        if ctx.attempt < 3:
            raise ConnectionError(f"try {ctx.attempt}")

    other = DAG("retry-dead")  # its death must not cancel flaky's retries

    @other.task(max_attempts=2)
    async def doomed(ctx: TaskContext) -> None:
        calls["doomed"] += 1
        raise ValueError("never")

    client = DAGClient(store, tracer_provider=cap.provider)
    run, run2 = await client.run(d), await client.run(other)
    runner = _runner(store, cap, d, other)
    await settle(store, runner, run.id, tracer_provider=cap.provider)
    await settle(store, runner, run2.id, tracer_provider=cap.provider)
    assert calls == {"flaky": 3, "doomed": 2}
    flaky_spans = cap.named("dag.task flaky")
    assert [(_attrs(s)[ATTR_ATTEMPT], _attrs(s)[ATTR_OUTCOME]) for s in flaky_spans] == [
        (1, "retried"),
        (2, "retried"),
        (3, "succeeded"),
    ]
    for s in flaky_spans[:2]:
        assert _attrs(s)[ATTR_RETRY_DELAY_S] == 0.0  # FAST policy: no backoff
        assert s.status.status_code is StatusCode.ERROR
        assert _exception(s)["exception.message"] == f"try {_attrs(s)[ATTR_ATTEMPT]}"
    assert ATTR_RETRY_DELAY_S not in _attrs(flaky_spans[2])
    doomed_spans = cap.named("dag.task doomed")
    assert [(_attrs(s)[ATTR_ATTEMPT], _attrs(s)[ATTR_OUTCOME]) for s in doomed_spans] == [
        (1, "retried"),
        (2, "dead"),
    ]
    [start] = cap.named("dag retry")
    assert {(_tid(s), parent_id(s)) for s in flaky_spans} == {(_tid(start), _sid(start))}
    # failed outright by the failure policy (nothing to compensate): its span too
    [start2] = cap.named("dag retry-dead")
    assert _attrs(start2)["azync.state"] == "failed"
    assert {(_tid(s), parent_id(s)) for s in doomed_spans} == {(_tid(start2), _sid(start2))}
    assert _tid(start) != _tid(start2)  # one trace per run
    assert nesting_violations(cap.spans()) == []


async def test_snoozed_skipped_and_deadlined_attempts(store: PostgresStore) -> None:
    cap = SpanCapture()
    d = DAG("waits")
    polls: list[int] = []

    @d.task
    async def poll(ctx: TaskContext) -> str:
        polls.append(ctx.attempt)
        if len(polls) == 1:
            raise NotReady(timedelta(milliseconds=20), reason="stock not counted")
        return "ready"

    @d.task
    async def optional(ctx: TaskContext) -> None:
        raise Skip("feature off")

    @d.task(deadline=timedelta(milliseconds=100), ignore_dead_deps=True)
    async def never(ctx: TaskContext) -> None:
        raise NotReady(timedelta(milliseconds=20), reason="still waiting")

    run = await DAGClient(store, tracer_provider=cap.provider).run(d)
    await settle(store, _runner(store, cap, d), run.id)
    poll_spans = cap.named("dag.task poll")
    assert [_attrs(s)[ATTR_OUTCOME] for s in poll_spans] == ["snoozed", "succeeded"]
    # a snooze does not spend an attempt: both are attempt 1
    assert [_attrs(s)[ATTR_ATTEMPT] for s in poll_spans] == [1, 1] == polls
    assert _attrs(poll_spans[0])[ATTR_RETRY_DELAY_S] == 0.02
    assert poll_spans[0].status.status_code is StatusCode.UNSET
    [skipped] = cap.named("dag.task optional")
    assert _attrs(skipped)[ATTR_OUTCOME] == "skipped"
    assert skipped.status.status_code is StatusCode.UNSET
    never_spans = cap.named("dag.task never")
    assert len(never_spans) >= 2
    assert {_attrs(s)[ATTR_OUTCOME] for s in never_spans[:-1]} == {"snoozed"}
    last = never_spans[-1]
    assert _attrs(last)[ATTR_OUTCOME] == "dead"
    assert last.status.status_code is StatusCode.ERROR
    assert _exception(last)["exception.type"].endswith("NotReady")


async def test_handler_spans_and_threads_nest_under_the_attempt_span(
    store: PostgresStore,
) -> None:
    cap = SpanCapture()
    app = cap.provider.get_tracer("app")
    seen: dict[str, int] = {}
    d = DAG("nest")

    def blocking_io() -> None:
        with app.start_as_current_span("db.query"):
            pass

    @d.task
    async def fetch(ctx: TaskContext) -> None:
        seen["current"] = trace.get_current_span().get_span_context().span_id
        with app.start_as_current_span("http.get"):
            await asyncio.sleep(0)
        await asyncio.gather(asyncio.create_task(_child_span(app)))
        await asyncio.to_thread(blocking_io)

    run = await DAGClient(store, tracer_provider=cap.provider).run(d)
    await settle(store, _runner(store, cap, d), run.id)
    [attempt] = cap.named("dag.task fetch")
    assert seen["current"] == _sid(attempt)
    for name in ("http.get", "child.task", "db.query"):
        [s] = cap.named(name)
        assert parent_id(s) == _sid(attempt), name
        assert _tid(s) == _tid(attempt)


async def _child_span(app: trace.Tracer) -> None:
    with app.start_as_current_span("child.task"):
        await asyncio.sleep(0)


async def test_signals_and_cancel_are_run_events_in_the_runs_trace(store: PostgresStore) -> None:
    client_cap = SpanCapture()
    d = DAG("approvals")

    @d.task
    async def prepare(ctx: TaskContext) -> None:
        return None

    d.signal("approve", after=[prepare])
    client = DAGClient(store, tracer_provider=client_cap.provider)
    run = await client.run(d)
    start_sid = run_span_id(run.id)
    # the sender is serving another request: its span is linked, not the parent
    other = client_cap.provider.get_tracer("app")
    with other.start_as_current_span("POST /approve") as sender:
        first = await client.signal(run.id, "approve", {"by": "ann"}, message_id="m1")
        again = await client.signal(run.id, "approve", {"by": "ann"}, message_id="m1")
    assert (first.deduplicated, again.deduplicated) == (False, True)
    [sig] = client_cap.named("signal approve")  # the duplicate is no event
    assert parent_id(sig) == start_sid
    assert [link.context.span_id for link in sig.links] == [sender.get_span_context().span_id]
    assert _attrs(sig)[ATTR_RUN_ID] == str(run.id)
    await client.cancel(run.id)
    [cancel] = client_cap.named("cancel.requested")
    assert parent_id(cancel) == start_sid
    assert (await client.get(run.id)).state == DAGState.CANCELLED
    # the cancel ended the run: the client exported the run span
    [start] = client_cap.named("dag approvals")
    assert (_sid(start), _attrs(start)["azync.state"]) == (start_sid, "cancelled")
    assert _tid(sig) == _tid(start)
    assert nesting_violations(client_cap.spans()) == []


async def test_untraced_run_signals_make_no_orphan_spans(store: PostgresStore) -> None:
    cap = SpanCapture()
    d = DAG("quiet")
    d.signal("go")
    run = await DAGClient(store).run(d)  # global provider: a no-op, nothing stored
    assert await store.dag_trace_context(run.id) == {}
    await DAGClient(store, tracer_provider=cap.provider).signal(run.id, "go")
    assert cap.spans() == []


async def test_worker_attempts_join_the_run_trace_started_elsewhere(
    store: PostgresStore,
) -> None:
    client_cap, worker_cap = SpanCapture("api"), SpanCapture("worker")
    d = DAG("wtrace")
    ran: list[uuid.UUID] = []

    @d.task
    async def a(ctx: TaskContext) -> None:
        ran.append(ctx.run_id)

    @d.task(after=[a], compensate=None, max_attempts=2)
    async def b(ctx: TaskContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("first try")

    w = Worker(store, handle_signals=False, maintain=())
    attach_dags(w, [d], retry=FAST, tracer_provider=worker_cap.provider)
    run = await DAGClient(store, tracer_provider=client_cap.provider).run(d)
    async with asyncio.timeout(30):
        await w.run_until_idle()
    assert (await store.get_dag(run.id)).state == DAGState.SUCCEEDED
    *spans, start = worker_cap.spans()
    assert start.name == "dag wtrace"  # the worker's scheduler settled the run
    assert client_cap.spans() == []
    assert nesting_violations(worker_cap.spans()) == []
    assert sorted((s.name, _attrs(s)[ATTR_ATTEMPT], _attrs(s)[ATTR_OUTCOME]) for s in spans) == [
        ("dag.task a", 1, "succeeded"),
        ("dag.task b", 1, "retried"),
        ("dag.task b", 2, "succeeded"),
    ]
    assert {(_tid(s), parent_id(s)) for s in spans} == {(_tid(start), _sid(start))}


async def test_reaped_attempt_is_closed_with_lease_expired_and_the_stale_one_has_no_outcome(
    store: PostgresStore, clock: MovableClock
) -> None:
    cap = SpanCapture()
    d = DAG("reaped")

    @d.task
    async def a(ctx: TaskContext) -> None:
        return None

    clock.set(datetime(2030, 1, 1, tzinfo=UTC))
    run = await DAGClient(store, tracer_provider=cap.provider).run(d)
    r = _runner(store, cap, d)
    (first,) = await store.dag_dequeue(r.kinds, 1, timedelta(seconds=30))
    clock.advance(timedelta(seconds=31))  # the worker holding `first` went silent
    stats = await DAGScheduler(store, tracer_provider=cap.provider).tick()
    assert stats.reaped == 1
    # the reaper closed the lost attempt: its span, ERROR "lease expired"
    [expired] = cap.named("dag.task a")
    assert parent_id(expired) == run_span_id(run.id)
    assert (expired.status.status_code, expired.status.description) == (
        StatusCode.ERROR,
        "lease expired",
    )
    a_ = _attrs(expired)
    assert (a_[ATTR_RUN_ID], a_[ATTR_TASK_KEY], a_[ATTR_ATTEMPT]) == (str(run.id), "a", 1)
    assert (a_[ATTR_DAG_NAME], a_[ATTR_OUTCOME]) == ("reaped", "retried")
    assert expired.start_time <= expired.end_time  # leased "in 2030": clamped to now
    (second,) = await store.dag_dequeue(r.kinds, 1, timedelta(seconds=30))
    assert await r.run_task(first) is None
    assert await r.run_task(second) is AttemptOutcome.SUCCEEDED
    _, stale, ok = cap.named("dag.task a")
    assert ATTR_OUTCOME not in _attrs(stale)  # the lease was lost: no outcome
    assert (_attrs(ok)[ATTR_ATTEMPT], _attrs(ok)[ATTR_OUTCOME]) == (2, "succeeded")


async def test_manual_compensate_with_nothing_to_undo_ends_the_run_and_exports_its_span(
    store: PostgresStore,
) -> None:
    cap = SpanCapture()
    d = DAG("undoable")
    d.signal("go")  # the run waits: nothing has succeeded, nothing to compensate
    client = DAGClient(store, tracer_provider=cap.provider)
    run = await client.run(d)
    await client.compensate(run.id)
    assert (await client.get(run.id)).state == DAGState.FAILED
    [span] = cap.named("dag undoable")
    assert (_sid(span), _attrs(span)["azync.state"]) == (run_span_id(run.id), "failed")
    assert span.status.status_code is StatusCode.ERROR
    # settled once: a scheduler tick afterwards exports nothing more
    await DAGScheduler(store, tracer_provider=cap.provider).tick(full=True)
    assert len(cap.named("dag undoable")) == 1
