"""Telemetry layer: run trace context, attempt spans, run events (in-memory SDK exporter)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from azync_flow.telemetry import (
    RUN_CALLER_KEY,
    AttemptKind,
    AttemptOutcome,
    RunEvent,
    RunKind,
    RunTracer,
    capture_trace_context,
    context_from_carrier,
    run_span_id,
    run_trace_id,
    suppress_spans,
    suppressed_context,
)
from azync_flow.testing_otel import SpanCapture, nesting_violations, parent_id, trace_ids


class ChargeDeclinedError(Exception):
    pass


def _through_storage(carrier: dict[str, str]) -> dict[str, str]:
    """What a worker reads back from the jsonb trace_context column."""
    return json.loads(json.dumps(carrier))


def _sampled(carrier: dict[str, str]) -> bool:
    return bool(int(carrier["traceparent"].rsplit("-", 1)[1], 16) & 0x01)


def _span_id(span) -> int:  # type: ignore[no-untyped-def]
    return span.context.span_id


def test_capture_without_active_span_is_empty() -> None:
    assert capture_trace_context() == {}


def test_capture_carries_traceparent_tracestate_and_baggage() -> None:
    cap = SpanCapture()
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with cap.provider.get_tracer("caller").start_as_current_span("request") as span:
            sc = span.get_span_context()
            state = trace.TraceState([("vendor", "x1")])
            with_state = trace.SpanContext(sc.trace_id, sc.span_id, False, sc.trace_flags, state)
            ctx = trace.set_span_in_context(trace.NonRecordingSpan(with_state))
            carrier = capture_trace_context(ctx)
    finally:
        otel_context.detach(token)
    assert carrier["traceparent"] == (
        f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"
    )
    assert _sampled(carrier)
    assert carrier["tracestate"] == "vendor=x1"
    assert carrier["baggage"] == "tenant=acme"
    restored = context_from_carrier(_through_storage(carrier))
    assert trace.get_current_span(restored).get_span_context().span_id == sc.span_id
    assert baggage.get_baggage("tenant", restored) == "acme"


STARTED = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)


def test_run_span_is_reserved_at_start_and_exported_whole_at_the_end() -> None:
    cap = SpanCapture()
    run_id = uuid.uuid4()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", run_id)
    assert cap.spans() == []  # nothing exported while the run runs
    assert carrier["traceparent"].split("-")[2] == f"{run_span_id(run_id):016x}"
    assert RUN_CALLER_KEY not in carrier  # no caller span: the run span is a root
    assert _sampled(carrier)
    with tracer.attempt_span(
        AttemptKind.ACTIVITY, "charge", carrier=_through_storage(carrier), run_id=run_id, attempt=1
    ):
        pass
    exported = tracer.end_run_span(
        RunKind.WORKFLOW,
        "order",
        run_id,
        carrier=_through_storage(carrier),
        started_at=STARTED,
        state="succeeded",
    )
    assert exported
    [attempt, root] = cap.spans()
    assert root.name == "workflow order"
    assert root.parent is None
    assert root.kind is SpanKind.INTERNAL
    assert root.context.span_id == run_span_id(run_id)
    assert root.attributes == {
        "azync.run_id": str(run_id),
        "azync.kind": "workflow",
        "azync.workflow.name": "order",
        "azync.state": "succeeded",
    }
    assert root.status.status_code is StatusCode.UNSET
    assert root.start_time == 1_796_011_200 * 10**9
    assert root.end_time >= attempt.end_time
    assert root.instrumentation_scope.name == "azync_flow"
    assert parent_id(attempt) == root.context.span_id
    assert nesting_violations(cap.spans()) == []


def test_failed_run_span_has_error_status_with_the_reason() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.DAG, "booking", "d1")
    tracer.end_run_span(
        RunKind.DAG,
        "booking",
        "d1",
        carrier=carrier,
        started_at=STARTED,
        state="failed",
        error="dead tasks: pay",
    )
    [run] = cap.named("dag booking")
    assert (run.status.status_code, run.status.description) == (
        StatusCode.ERROR,
        "dead tasks: pay",
    )
    assert run.attributes["azync.dag.name"] == "booking"


def test_run_span_is_not_exported_for_a_carrier_that_did_not_reserve_it() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    other = tracer.start_run_span(RunKind.WORKFLOW, "order", "r-other")
    common = {"started_at": STARTED, "state": "succeeded"}
    assert not tracer.end_run_span(RunKind.WORKFLOW, "order", "r1", carrier=other, **common)
    assert cap.spans() == []


def test_lost_attempt_is_closed_with_error_status_lease_expired() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
    tracer.lost_attempt(
        AttemptKind.ACTIVITY,
        "charge",
        carrier=carrier,
        run_id="r1",
        attempt=3,
        started_at=STARTED,
        outcome=AttemptOutcome.RETRIED,
        workflow_name="order",
        seq=4,
    )
    [lost] = cap.named("activity charge")
    assert lost.status.status_code is StatusCode.ERROR
    assert lost.status.description == "lease expired"
    assert [e.name for e in lost.events] == ["lease expired"]
    assert lost.start_time == 1_796_011_200 * 10**9
    assert lost.end_time > lost.start_time
    assert parent_id(lost) == run_span_id("r1")
    assert lost.attributes["azync.attempt"] == 3
    assert lost.attributes["azync.outcome"] == "retried"


def test_run_started_inside_a_caller_span_joins_the_callers_trace() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    with cap.provider.get_tracer("caller").start_as_current_span("POST /orders") as caller:
        carrier = tracer.start_run_span(RunKind.DAG, "booking", "dag-1")
    assert carrier[RUN_CALLER_KEY] == f"{caller.get_span_context().span_id:016x}"
    tracer.end_run_span(
        RunKind.DAG,
        "booking",
        "dag-1",
        carrier=_through_storage(carrier),
        started_at=STARTED,
        state="cancelled",
    )
    [start] = cap.named("dag booking")
    assert start.context.trace_id == caller.get_span_context().trace_id
    assert start.parent is None  # it outlives the caller's span: a linked root, not a child
    assert [link.context.span_id for link in start.links] == [caller.get_span_context().span_id]
    assert nesting_violations(cap.spans()) == []
    assert start.attributes["azync.dag.name"] == "booking"
    assert f"{start.context.span_id:016x}" in carrier["traceparent"]


def test_attempt_in_another_process_is_a_child_of_the_run_span() -> None:
    caller, worker = SpanCapture("api"), SpanCapture("worker")
    run_id = uuid.uuid4()
    with caller.provider.get_tracer("api").start_as_current_span("POST /orders"):
        stored = json.dumps(
            RunTracer(caller.provider).start_run_span(RunKind.WORKFLOW, "order", run_id)
        )
        caller_span = trace.get_current_span().get_span_context()

    # The worker process has its own provider and an unrelated ambient span.
    with (
        worker.provider.get_tracer("loop").start_as_current_span("poll loop"),
        RunTracer(worker.provider).attempt_span(
            AttemptKind.ACTIVITY,
            "charge",
            carrier=json.loads(stored),
            run_id=run_id,
            attempt=1,
            workflow_name="order",
            seq=4,
        ) as att,
    ):
        att.set_outcome(AttemptOutcome.SUCCEEDED)
    [span] = worker.named("activity charge")
    assert span.context.trace_id == caller_span.trace_id
    assert parent_id(span) == run_span_id(run_id)
    assert span.parent.is_remote
    assert span.kind is SpanKind.CONSUMER
    assert dict(span.attributes) == {
        "azync.run_id": str(run_id),
        "azync.kind": "activity",
        "azync.attempt": 1,
        "azync.workflow.name": "order",
        "azync.seq": 4,
        "azync.outcome": "succeeded",
    }
    assert span.status.status_code is StatusCode.UNSET


async def test_retries_make_one_span_per_attempt_with_outcome_and_error() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = _through_storage(tracer.start_run_span(RunKind.WORKFLOW, "order", "run-1"))
    delays = [timedelta(seconds=2), 4.5]
    for attempt in (1, 2, 3):
        async with tracer.attempt_span(
            AttemptKind.ACTIVITY, "charge", carrier=carrier, run_id="run-1", attempt=attempt
        ) as att:
            try:
                if attempt < 3:
                    raise ChargeDeclinedError(f"declined #{attempt}")
            except ChargeDeclinedError as exc:
                att.record_failure(exc)
                att.set_outcome(AttemptOutcome.RETRIED, retry_delay=delays[attempt - 1])
            else:
                att.set_outcome(AttemptOutcome.SUCCEEDED)
    spans = cap.named("activity charge")
    assert [s.attributes["azync.attempt"] for s in spans] == [1, 2, 3]
    assert [s.attributes["azync.outcome"] for s in spans] == ["retried", "retried", "succeeded"]
    assert [s.attributes.get("azync.retry_delay_s") for s in spans] == [2.0, 4.5, None]
    assert [s.status.status_code for s in spans] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert spans[0].status.description == "ChargeDeclinedError: declined #1"
    [event] = spans[1].events
    assert event.name == "exception"
    assert event.attributes["exception.type"].endswith("ChargeDeclinedError")
    assert event.attributes["exception.message"] == "declined #2"
    assert "Traceback" in event.attributes["exception.stacktrace"]
    assert {parent_id(s) for s in spans} == {run_span_id("run-1")}
    assert len(trace_ids(cap.spans())) == 1


def test_exception_leaving_the_block_is_recorded_once_and_reraised() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.DAG, "booking", "d1")

    def run_attempt() -> None:
        with tracer.attempt_span(
            AttemptKind.DAG_TASK,
            "pay",
            carrier=carrier,
            run_id="d1",
            attempt=5,
            dag_name="booking",
            task_key="pay",
        ) as att:
            exc = ChargeDeclinedError("card")
            att.record_failure(exc)
            att.set_outcome(AttemptOutcome.DEAD)
            raise exc

    with pytest.raises(ChargeDeclinedError, match="card"):
        run_attempt()
    [span] = cap.named("dag.task pay")
    assert span.end_time is not None
    assert [e.name for e in span.events] == ["exception"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["azync.outcome"] == "dead"
    assert span.attributes["azync.task_key"] == "pay"
    assert span.attributes["azync.dag.name"] == "booking"
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_handler_spans_nest_under_the_attempt_span() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    user = cap.provider.get_tracer("user-code")
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")

    async def handler() -> None:
        with user.start_as_current_span("HTTP POST"):
            pass
        await asyncio.create_task(_in_task())
        await asyncio.to_thread(_in_thread)

    async def _in_task() -> None:
        with user.start_as_current_span("db query"):
            pass

    def _in_thread() -> None:
        with user.start_as_current_span("sync sdk call"):
            pass

    async with tracer.attempt_span(
        AttemptKind.ACTIVITY, "charge", carrier=carrier, run_id="r1", attempt=1
    ) as att:
        await handler()
    assert trace.get_current_span() is trace.INVALID_SPAN
    attempt_id = _span_id(att.span)
    for name in ("HTTP POST", "db query", "sync sdk call"):
        [span] = cap.named(name)
        assert parent_id(span) == attempt_id, name
        assert span.context.trace_id == att.span.get_span_context().trace_id


def test_sync_handler_in_a_plain_thread_uses_the_attempt_context() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
    with tracer.attempt_span(
        AttemptKind.ACTIVITY, "ship", carrier=carrier, run_id="r1", attempt=1
    ) as att:
        import threading

        def work() -> None:
            token = otel_context.attach(att.context)
            try:
                with cap.provider.get_tracer("u").start_as_current_span("carrier api"):
                    pass
            finally:
                otel_context.detach(token)

        t = threading.Thread(target=work)
        t.start()
        t.join()
    [span] = cap.named("carrier api")
    assert parent_id(span) == _span_id(att.span)


def test_workflow_task_records_pass_statistics() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
    with tracer.attempt_span(
        AttemptKind.WORKFLOW_TASK,
        "order",
        carrier=carrier,
        run_id="r1",
        attempt=1,
        workflow_name="order",
        seq=9,
    ) as att:
        att.set_pass_stats(history_length=8, events_replayed=8, new_commands=2)
        att.add_event("signal.consumed", {"azync.signal.name": "approve"})
        att.set_outcome(AttemptOutcome.SUCCEEDED)
    [span] = cap.named("workflow.task order")
    assert span.attributes["azync.history_length"] == 8
    assert span.attributes["azync.events_replayed"] == 8
    assert span.attributes["azync.new_commands"] == 2
    assert span.attributes["azync.seq"] == 9
    assert [(e.name, dict(e.attributes)) for e in span.events] == [
        ("signal.consumed", {"azync.signal.name": "approve"})
    ]


def test_run_event_is_a_short_child_span_linked_to_the_senders_trace() -> None:
    api, leader = SpanCapture("api"), SpanCapture("leader")
    carrier = _through_storage(
        RunTracer(api.provider).start_run_span(RunKind.WORKFLOW, "order", "r1")
    )
    with api.provider.get_tracer("api").start_as_current_span("POST /approve") as req:
        RunTracer(api.provider).run_event(
            carrier, RunEvent.SIGNAL, run_id="r1", subject="approve", attributes={"azync.seq": 3}
        )
    fired_at = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    RunTracer(leader.provider).run_event(carrier, RunEvent.TIMER_FIRED, run_id="r1", at=fired_at)

    [signal] = api.named("signal approve")
    assert parent_id(signal) == run_span_id("r1")
    assert f"{signal.context.trace_id:032x}" in carrier["traceparent"]
    assert [link.context.span_id for link in signal.links] == [req.get_span_context().span_id]
    assert signal.attributes["azync.kind"] == "signal"
    assert signal.attributes["azync.seq"] == 3
    [timer] = leader.named("timer.fired")
    assert parent_id(timer) == run_span_id("r1")
    assert timer.start_time == timer.end_time == 1_796_011_200 * 10**9
    with pytest.raises(ValueError, match="timezone-aware"):
        RunTracer(leader.provider).run_event(
            carrier,
            RunEvent.TIMER_FIRED,
            run_id="r1",
            at=datetime(2026, 11, 30),  # noqa: DTZ001
        )
    assert timer.links == ()


def test_dag_run_with_compensation_is_one_trace() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = _through_storage(tracer.start_run_span(RunKind.DAG, "booking", "d1"))
    common = {"carrier": carrier, "run_id": "d1", "dag_name": "booking"}
    for key, outcome in (("reserve", AttemptOutcome.SUCCEEDED), ("pay", AttemptOutcome.DEAD)):
        with tracer.attempt_span(
            AttemptKind.DAG_TASK, key, task_key=key, attempt=1, **common
        ) as att:
            if outcome is AttemptOutcome.DEAD:
                att.record_failure(ChargeDeclinedError("no funds"))
            att.set_outcome(outcome)
    with tracer.attempt_span(
        AttemptKind.DAG_COMPENSATION, "reserve", task_key="reserve", attempt=1, **common
    ) as att:
        att.set_outcome(AttemptOutcome.SUCCEEDED)
    tracer.run_event(carrier, RunEvent.CANCEL_REQUESTED, run_id="d1")
    tracer.end_run_span(
        RunKind.DAG,
        "booking",
        "d1",
        carrier=carrier,
        started_at=datetime.now(UTC) - timedelta(minutes=1),
        state="cancelled",
    )

    names = [s.name for s in cap.spans()]
    assert names == [
        "dag.task reserve",
        "dag.task pay",
        "dag.compensation reserve",
        "cancel.requested",
        "dag booking",
    ]
    [start] = cap.named("dag booking")
    assert all(parent_id(s) == start.context.span_id for s in cap.spans()[:-1])
    assert nesting_violations(cap.spans()) == []
    assert len(trace_ids(cap.spans())) == 1
    [comp] = cap.named("dag.compensation reserve")
    assert comp.attributes["azync.kind"] == "dag.compensation"


def test_a_run_started_without_trace_context_gets_one_trace_derived_from_its_run_id() -> None:
    # the run was started by a process without tracing (carrier {}): each
    # worker derives the same trace and run span from the run id
    worker_1, worker_2 = SpanCapture("worker-1"), SpanCapture("worker-2")
    with (
        worker_1.provider.get_tracer("loop").start_as_current_span("poll loop") as loop_span,
        RunTracer(worker_1.provider).attempt_span(
            AttemptKind.ACTIVITY, "charge", carrier={}, run_id="r1", attempt=1
        ),
    ):
        pass
    tracer_2 = RunTracer(worker_2.provider)
    with tracer_2.attempt_span(
        AttemptKind.WORKFLOW_TASK, "order", carrier={}, run_id="r1", attempt=1
    ):
        pass
    tracer_2.run_event({}, RunEvent.SIGNAL, run_id="r1", subject="approve")
    assert tracer_2.end_run_span(
        RunKind.WORKFLOW, "order", "r1", carrier={}, started_at=STARTED, state="succeeded"
    )
    spans = worker_1.named("activity charge") + worker_2.spans()
    assert trace_ids(spans) == {run_trace_id("r1")}
    assert loop_span.get_span_context().trace_id != run_trace_id("r1")
    [run] = worker_2.named("workflow order")
    assert run.context.span_id == run_span_id("r1")
    assert run.parent is None
    others = [s for s in spans if s is not run]
    assert [parent_id(s) for s in others] == [run_span_id("r1")] * 3


def test_a_queue_job_without_stored_context_starts_its_own_trace() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    with (
        cap.provider.get_tracer("loop").start_as_current_span("poll loop") as loop_span,
        tracer.attempt_span(AttemptKind.JOB, "mail", carrier={}, run_id="j1", attempt=1),
    ):
        pass
    [span] = cap.named("job mail")
    assert span.parent is None
    assert span.context.trace_id != loop_span.get_span_context().trace_id
    assert span.context.trace_id != run_trace_id("j1")


def test_unsampled_run_keeps_its_attempts_unsampled_in_other_processes() -> None:
    caller = TracerProvider(sampler=ALWAYS_OFF)
    worker = SpanCapture("worker")
    carrier = _through_storage(RunTracer(caller).start_run_span(RunKind.WORKFLOW, "order", "r1"))
    assert not _sampled(carrier)
    with RunTracer(worker.provider).attempt_span(
        AttemptKind.ACTIVITY, "charge", carrier=carrier, run_id="r1", attempt=1
    ) as att:
        assert not att.span.is_recording()
    assert worker.spans() == []


def test_suppress_spans_drops_user_spans_but_not_attempt_spans() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    user = cap.provider.get_tracer("user-workflow-code")
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
    with tracer.attempt_span(
        AttemptKind.WORKFLOW_TASK, "order", carrier=carrier, run_id="r1", attempt=1
    ) as att:
        with suppress_spans():
            with user.start_as_current_span("replayed step"):
                pass
            assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is True
        with user.start_as_current_span("live step"):
            pass
    assert cap.named("replayed step") == []
    [live] = cap.named("live step")
    assert parent_id(live) == _span_id(att.span)


def test_library_installs_no_provider_and_needs_no_sdk() -> None:
    code = textwrap.dedent(
        """
        import sys
        from datetime import UTC, datetime
        from opentelemetry import trace
        from azync_flow import telemetry as t
        carrier = t.start_run_span(t.RunKind.WORKFLOW, "order", "r1")
        with t.attempt_span(t.AttemptKind.ACTIVITY, "charge", carrier=carrier, run_id="r1",
                            attempt=1) as att:
            att.set_outcome(t.AttemptOutcome.SUCCEEDED)
            recording = att.span.is_recording()
        t.run_event(carrier, t.RunEvent.SIGNAL, run_id="r1", subject="go")
        sdk_loaded = any(m.startswith("opentelemetry.sdk") for m in sys.modules)
        proxy = type(trace.get_tracer_provider()).__name__
        print(carrier, recording, sdk_loaded, proxy)

        # A provider configured later by the application is picked up.
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exp = InMemorySpanExporter()
        p = TracerProvider(); p.add_span_processor(SimpleSpanProcessor(exp))
        trace.set_tracer_provider(p)
        c = t.start_run_span(t.RunKind.WORKFLOW, "order", "r2")
        t.default_run_tracer().end_run_span(t.RunKind.WORKFLOW, "order", "r2", carrier=c,
            started_at=datetime.now(UTC), state="succeeded")
        print([s.name for s in exp.get_finished_spans()])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "{} False False ProxyTracerProvider",
        "['workflow order']",
    ]


async def test_unhandled_exception_marks_the_attempt_failed() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")

    async def run_attempt() -> None:
        async with tracer.attempt_span(
            AttemptKind.ACTIVITY, "charge", carrier=carrier, run_id="r1", attempt=1
        ):
            raise ChargeDeclinedError("boom")

    with pytest.raises(ChargeDeclinedError):
        await run_attempt()
    [span] = cap.named("activity charge")
    assert span.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.message"] for e in span.events] == ["boom"]
    assert "azync.outcome" not in span.attributes


async def test_long_lived_workflow_task_in_a_suppressed_context_never_emits_spans() -> None:
    """A cached workflow instance outlives passes; its task context stays suppressed."""
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    user = cap.provider.get_tracer("user-workflow-code")
    carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
    wakeups = [asyncio.get_running_loop().create_future() for _ in range(3)]

    async def workflow_code() -> None:
        for i, fut in enumerate(wakeups):
            await fut
            with user.start_as_current_span(f"step {i}"):
                pass

    task = None
    for attempt, fut in enumerate(wakeups, start=1):
        async with tracer.attempt_span(
            AttemptKind.WORKFLOW_TASK, "order", carrier=carrier, run_id="r1", attempt=attempt
        ):
            if task is None:
                # The runtime's recipe: the workflow's root task gets a suppressed context.
                task_ctx = contextvars.copy_context()
                task_ctx.run(otel_context.attach, suppressed_context())
                task = asyncio.get_running_loop().create_task(workflow_code(), context=task_ctx)
            fut.set_result(None)
            await asyncio.sleep(0)
    assert task is not None
    await task
    assert [s.name for s in cap.spans()] == ["workflow.task order"] * 3


def test_suppress_spans_works_without_any_current_span() -> None:
    cap = SpanCapture()
    user = cap.provider.get_tracer("user-workflow-code")
    assert trace.get_current_span() is trace.INVALID_SPAN
    with suppress_spans(), user.start_as_current_span("would be a root span") as span:
        assert not span.is_recording()
    assert cap.spans() == []


def test_failure_without_message_has_the_type_as_status_description() -> None:
    cap = SpanCapture()
    tracer = RunTracer(cap.provider)
    with tracer.attempt_span(
        AttemptKind.JOB, "send_email", carrier={}, run_id="j1", attempt=2
    ) as att:
        att.record_failure(TimeoutError())
        att.set_outcome(AttemptOutcome.RETRIED, retry_delay=timedelta(milliseconds=250))
    [span] = cap.named("job send_email")
    assert span.status.description == "TimeoutError"
    assert span.attributes["azync.retry_delay_s"] == 0.25
    assert span.attributes["azync.kind"] == "job"
