"""OpenTelemetry spans for runs: one trace per run, one span per attempt.

This module depends on ``opentelemetry-api`` only. Spans go to whatever
``TracerProvider`` the application configured (the global one by default, or
the one handed to :class:`RunTracer`); nothing here installs a provider. With
no provider configured every call is a cheap no-op.

Integration points (see ``docs/tracing.md`` for the full rules):

* **Start of a run** (``start_workflow``/``start_dag``, in the caller's process)::

      carrier = run_tracer.start_run_span(RunKind.WORKFLOW, "order", run_id)
      # store `carrier` (dict[str, str]) in the run row's trace_context column

* **Each attempt** (worker, any process, any time later)::

      async with run_tracer.attempt_span(
          AttemptKind.ACTIVITY, "charge", carrier=row.trace_context,
          run_id=run_id, workflow_name="order", seq=7, attempt=job.attempt,
      ) as span:
          try:
              result = await handler(...)      # user spans nest under `span`
          except Exception as exc:
              span.record_failure(exc)
              span.set_outcome(Outcome.RETRIED, retry_delay=delay)
          else:
              span.set_outcome(Outcome.SUCCEEDED)

* **Run events** (signals, timer firings, uncertain resolutions, cancellations,
  expired leases)::

      run_tracer.run_event(carrier, RunEvent.SIGNAL, run_id=run_id, subject="approve")

Replay rule: only the attempt that actually executes makes a span. A workflow
task (replay pass) makes exactly one ``workflow.task`` span whatever it
replays; the runtime never opens a span for a step it finds in history, and it
wraps the replaying part of a pass in :func:`suppress_spans` so spans that
user workflow code creates while replaying are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import Token
from datetime import datetime, timedelta
from enum import StrEnum
from importlib import metadata
from types import TracebackType
from typing import Any, Self
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

__all__ = [
    "ATTR_ATTEMPT",
    "ATTR_DAG_NAME",
    "ATTR_EVENTS_REPLAYED",
    "ATTR_HISTORY_LENGTH",
    "ATTR_KIND",
    "ATTR_NEW_COMMANDS",
    "ATTR_OUTCOME",
    "ATTR_RETRY_DELAY_S",
    "ATTR_RUN_ID",
    "ATTR_SEQ",
    "ATTR_TASK_KEY",
    "ATTR_WORKFLOW_NAME",
    "INSTRUMENTATION_NAME",
    "AttemptKind",
    "AttemptSpan",
    "Outcome",
    "RunEvent",
    "RunKind",
    "RunTracer",
    "attempt_span",
    "capture_trace_context",
    "context_from_carrier",
    "default_run_tracer",
    "run_event",
    "start_run_span",
    "suppress_spans",
]

INSTRUMENTATION_NAME = "azync_flow"

ATTR_RUN_ID = "azync.run_id"
ATTR_KIND = "azync.kind"
ATTR_WORKFLOW_NAME = "azync.workflow.name"
ATTR_DAG_NAME = "azync.dag.name"
ATTR_TASK_KEY = "azync.task_key"
ATTR_SEQ = "azync.seq"
ATTR_ATTEMPT = "azync.attempt"
ATTR_OUTCOME = "azync.outcome"
ATTR_RETRY_DELAY_S = "azync.retry_delay_s"
ATTR_HISTORY_LENGTH = "azync.history_length"
ATTR_EVENTS_REPLAYED = "azync.events_replayed"
ATTR_NEW_COMMANDS = "azync.new_commands"

# The stored carrier must read the same in every process whatever propagators
# the application configured globally, so the format is fixed: W3C Trace
# Context (traceparent, tracestate) plus W3C Baggage.
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

# The context key that OpenTelemetry instrumentations check before creating
# spans (opentelemetry.instrumentation.utils.is_instrumentation_enabled).
_SUPPRESS_INSTRUMENTATION_KEY: str = otel_context._SUPPRESS_INSTRUMENTATION_KEY


class RunKind(StrEnum):
    """What a run is; prefixes the run's start span name."""

    WORKFLOW = "workflow"
    DAG = "dag"


class AttemptKind(StrEnum):
    """What an attempt executes; the span name is ``"<kind> <name>"``."""

    WORKFLOW_TASK = "workflow.task"
    ACTIVITY = "activity"
    DAG_TASK = "dag.task"
    DAG_COMPENSATION = "dag.compensation"


class Outcome(StrEnum):
    """How an attempt ended, recorded as ``azync.outcome``."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEAD = "dead"
    SNOOZED = "snoozed"
    SKIPPED = "skipped"
    UNCERTAIN = "uncertain"


class RunEvent(StrEnum):
    """Things that happen to a run outside any attempt; a short span each."""

    SIGNAL = "signal"
    TIMER_FIRED = "timer.fired"
    UNCERTAIN_RESOLVED = "uncertain.resolved"
    CANCEL_REQUESTED = "cancel.requested"
    LEASE_EXPIRED = "lease.expired"


def _package_version() -> str:
    try:
        return metadata.version("azync-flow")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0+unknown"


def capture_trace_context(ctx: otel_context.Context | None = None) -> dict[str, str]:
    """Serialize the active (or given) trace context as a W3C carrier.

    Args:
        ctx: Context to capture; the current context when omitted.

    Returns:
        ``{"traceparent": ..., "tracestate": ..., "baggage": ...}`` with only the
        keys that apply; ``{}`` when there is no valid span context. The dict is
        JSON-safe and meant to be stored with the run (``trace_context`` column).
    """
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=ctx)
    return carrier


def context_from_carrier(carrier: Mapping[str, str] | None) -> otel_context.Context:
    """Rebuild a parent context from a stored carrier.

    Args:
        carrier: What :func:`capture_trace_context` returned, read back from
            storage. ``None``, ``{}`` or a malformed carrier give an empty
            context, so a span started with it becomes the root of a new trace.

    Returns:
        A context holding the remote parent span context and baggage; it never
        includes the ambient context of the calling code.
    """
    if not carrier:
        return otel_context.Context()
    return _PROPAGATOR.extract(dict(carrier), context=otel_context.Context())


def _run_id_str(run_id: UUID | str) -> str:
    return str(run_id)


def _seconds(delay: timedelta | float) -> float:
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


def _ns(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1e9)


class AttemptSpan:
    """One attempt's span: a context manager usable with ``with`` and ``async with``.

    While the block runs the span is the current span (its context is
    attached), so spans that the handler creates are its children. On leaving
    the block the context is detached and the span ended; an exception leaving
    the block is recorded (error status, ``exception`` event) and re-raised.

    Create it with :meth:`RunTracer.attempt_span`; do not reuse an instance.
    """

    __slots__ = ("_ctx", "_failed_with", "_span", "_token")

    def __init__(self, span: trace.Span, parent: otel_context.Context) -> None:
        self._span = span
        self._ctx = trace.set_span_in_context(span, parent)
        self._token: Token[otel_context.Context] | None = None
        self._failed_with: BaseException | None = None

    @property
    def span(self) -> trace.Span:
        """The underlying OpenTelemetry span (non-recording when tracing is off)."""
        return self._span

    @property
    def context(self) -> otel_context.Context:
        """Context with this span current; attach it in a thread that runs the handler.

        ``loop.run_in_executor`` does not copy context variables; use
        ``asyncio.to_thread`` or ``contextvars.copy_context().run`` inside the
        block, or ``opentelemetry.context.attach(span.context)`` in the thread.
        """
        return self._ctx

    def set_outcome(
        self, outcome: Outcome, *, retry_delay: timedelta | float | None = None
    ) -> None:
        """Record how the attempt ended.

        Args:
            outcome: The attempt's outcome; set it once, after the store settled
                the attempt (ack, reschedule, dead, snooze, skip, mark uncertain).
            retry_delay: For ``RETRIED`` (or ``SNOOZED``), the delay before the
                next attempt; ``timedelta`` or seconds. Recorded as
                ``azync.retry_delay_s`` (float seconds).
        """
        self._span.set_attribute(ATTR_OUTCOME, outcome.value)
        if retry_delay is not None:
            self._span.set_attribute(ATTR_RETRY_DELAY_S, _seconds(retry_delay))

    def record_failure(
        self, exc: BaseException, *, attributes: Mapping[str, Any] | None = None
    ) -> None:
        """Mark the attempt failed: error status plus an ``exception`` event.

        Args:
            exc: The exception the handler raised; the event carries its type,
                message and stack trace. Recorded once even if it also leaves the
                block.
            attributes: Extra attributes for the exception event.
        """
        if self._failed_with is exc:
            return
        self._failed_with = exc
        self._span.record_exception(exc, attributes=dict(attributes or {}))
        self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def set_pass_stats(
        self, *, history_length: int, events_replayed: int, new_commands: int
    ) -> None:
        """Record replay statistics of a workflow task (pass).

        Args:
            history_length: Events in the history when the pass started.
            events_replayed: History events the pass matched while replaying.
            new_commands: Commands the pass appended (activities scheduled,
                timers started, completion, ...).
        """
        self._span.set_attribute(ATTR_HISTORY_LENGTH, history_length)
        self._span.set_attribute(ATTR_EVENTS_REPLAYED, events_replayed)
        self._span.set_attribute(ATTR_NEW_COMMANDS, new_commands)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one extra attribute on the span."""
        self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
        """Add a span event (e.g. ``signal.consumed`` during a pass)."""
        self._span.add_event(name, attributes=dict(attributes or {}))

    def __enter__(self) -> Self:
        self._token = otel_context.attach(self._ctx)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is not None:
                self.record_failure(exc)
        finally:
            if self._token is not None:
                otel_context.detach(self._token)
                self._token = None
            self._span.end()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class RunTracer:
    """Creates the spans of runs on one tracer provider.

    Workers, clients and runtimes hold one instance, built from the
    ``tracer_provider`` option they accept (``None`` = the global provider,
    resolved lazily, so configuring it after import works).

    Args:
        tracer_provider: Provider to use; ``None`` for the application's global one.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, _package_version(), tracer_provider=tracer_provider
        )

    @property
    def tracer(self) -> trace.Tracer:
        """The ``azync_flow`` tracer."""
        return self._tracer

    def start_run_span(
        self,
        kind: RunKind,
        name: str,
        run_id: UUID | str,
        *,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> dict[str, str]:
        """Open and end the run's short start span; return the carrier to store.

        The span (``workflow.start <name>`` or ``dag.start <name>``) is a child of
        the caller's active span, so the run joins the caller's trace; with no
        active span it is the root of a new trace. Every later attempt and run
        event is its child.

        Args:
            kind: Workflow or DAG.
            name: Registered workflow or DAG name (low cardinality).
            run_id: The execution or DAG id.
            attributes: Extra span attributes.

        Returns:
            The W3C carrier of the start span: store it with the run (the
            ``trace_context`` column). With tracing off (no SDK provider) it is
            the caller's own context, or ``{}`` when the caller has none. A
            start span that the sampler dropped yields a traceparent with the
            sampled flag off, so the run's attempts are dropped consistently.
        """
        attrs: dict[str, AttributeValue] = {
            ATTR_RUN_ID: _run_id_str(run_id),
            ATTR_KIND: kind.value,
            ATTR_WORKFLOW_NAME if kind is RunKind.WORKFLOW else ATTR_DAG_NAME: name,
        }
        attrs.update(attributes or {})
        span = self._tracer.start_span(
            f"{kind.value}.start {name}", kind=SpanKind.PRODUCER, attributes=attrs
        )
        try:
            return capture_trace_context(trace.set_span_in_context(span))
        finally:
            span.end()

    def attempt_span(
        self,
        kind: AttemptKind,
        name: str,
        *,
        carrier: Mapping[str, str] | None,
        run_id: UUID | str,
        attempt: int,
        workflow_name: str | None = None,
        dag_name: str | None = None,
        task_key: str | None = None,
        seq: int | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> AttemptSpan:
        """Start the span of one attempt as a child of the run's stored context.

        The parent is always the stored carrier, never the ambient context of
        the worker, so every attempt of a run lands in the run's trace under the
        same parent whichever process runs it.

        Args:
            kind: Workflow task, activity, DAG task or compensation.
            name: Low-cardinality name: the workflow name for a workflow task,
                the activity name, the DAG task key.
            carrier: The run's stored trace context (``{}``/``None`` starts a new trace).
            run_id: The execution or DAG id.
            attempt: Attempt number (1-based; the job's ``attempt``).
            workflow_name: Workflow name, recorded as ``azync.workflow.name``.
            dag_name: DAG name, recorded as ``azync.dag.name``.
            task_key: DAG task key (``azync.task_key``).
            seq: History seq of the command (activities) or the pass's first seq.
            attributes: Extra span attributes.

        Returns:
            An :class:`AttemptSpan`; use it with ``with`` or ``async with``.
        """
        attrs: dict[str, AttributeValue] = {
            ATTR_RUN_ID: _run_id_str(run_id),
            ATTR_KIND: kind.value,
            ATTR_ATTEMPT: attempt,
        }
        optional = {
            ATTR_WORKFLOW_NAME: workflow_name,
            ATTR_DAG_NAME: dag_name,
            ATTR_TASK_KEY: task_key,
            ATTR_SEQ: seq,
        }
        attrs.update({k: v for k, v in optional.items() if v is not None})
        attrs.update(attributes or {})
        parent = context_from_carrier(carrier)
        span = self._tracer.start_span(
            f"{kind.value} {name}", context=parent, kind=SpanKind.CONSUMER, attributes=attrs
        )
        return AttemptSpan(span, parent)

    def run_event(
        self,
        carrier: Mapping[str, str] | None,
        event: RunEvent,
        *,
        run_id: UUID | str,
        subject: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record a run event as a short span on the run's trace.

        The span is named ``"<event>"`` or ``"<event> <subject>"`` and is a child
        of the run's start span. When the calling code has an active span of a
        different trace (a client sending a signal from its own request), the
        event span links to it.

        Args:
            carrier: The run's stored trace context.
            event: What happened.
            run_id: The execution or DAG id.
            subject: Low-cardinality detail for the name: the signal name, the
                operation name; never an id.
            attributes: Extra attributes (seq, task key, resolution, ...).
            at: When it happened (UTC-aware); now when omitted.
        """
        attrs: dict[str, AttributeValue] = {
            ATTR_RUN_ID: _run_id_str(run_id),
            ATTR_KIND: event.value,
        }
        attrs.update(attributes or {})
        parent = context_from_carrier(carrier)
        links = _caller_link(parent)
        start = _ns(at) or time.time_ns()
        span = self._tracer.start_span(
            event.value if subject is None else f"{event.value} {subject}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=links,
            start_time=start,
        )
        span.end(end_time=None if at is None else start)


def _caller_link(parent: otel_context.Context) -> list[Link]:
    current = trace.get_current_span().get_span_context()
    if not current.is_valid:
        return []
    if current.trace_id == trace.get_current_span(parent).get_span_context().trace_id:
        return []
    return [Link(current)]


@contextmanager
def suppress_spans() -> Iterator[None]:
    """Drop spans created inside the block (for workflow code while it replays).

    Attaches a context whose current span is non-recording and not sampled, and
    sets the ``suppress_instrumentation`` flag that OpenTelemetry
    instrumentations honour. With the SDK's default ``ParentBased`` sampler a
    span started inside has no effect and is never exported. Spans started with
    an explicit parent context (the azync_flow attempt spans) are not affected.
    """
    current = trace.get_current_span().get_span_context()
    unsampled = trace.SpanContext(
        trace_id=current.trace_id if current.is_valid else trace.INVALID_TRACE_ID,
        span_id=current.span_id if current.is_valid else trace.INVALID_SPAN_ID,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
        trace_state=current.trace_state,
    )
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(unsampled))
    ctx = otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True, ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


_default: RunTracer | None = None


def default_run_tracer() -> RunTracer:
    """The process-wide :class:`RunTracer` on the global tracer provider."""
    global _default
    if _default is None:
        _default = RunTracer()
    return _default


def start_run_span(
    kind: RunKind,
    name: str,
    run_id: UUID | str,
    *,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> dict[str, str]:
    """:meth:`RunTracer.start_run_span` on the global tracer provider."""
    return default_run_tracer().start_run_span(kind, name, run_id, attributes=attributes)


def attempt_span(
    kind: AttemptKind,
    name: str,
    *,
    carrier: Mapping[str, str] | None,
    run_id: UUID | str,
    attempt: int,
    workflow_name: str | None = None,
    dag_name: str | None = None,
    task_key: str | None = None,
    seq: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> AttemptSpan:
    """:meth:`RunTracer.attempt_span` on the global tracer provider."""
    return default_run_tracer().attempt_span(
        kind,
        name,
        carrier=carrier,
        run_id=run_id,
        attempt=attempt,
        workflow_name=workflow_name,
        dag_name=dag_name,
        task_key=task_key,
        seq=seq,
        attributes=attributes,
    )


def run_event(
    carrier: Mapping[str, str] | None,
    event: RunEvent,
    *,
    run_id: UUID | str,
    subject: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    at: datetime | None = None,
) -> None:
    """:meth:`RunTracer.run_event` on the global tracer provider."""
    default_run_tracer().run_event(
        carrier, event, run_id=run_id, subject=subject, attributes=attributes, at=at
    )
