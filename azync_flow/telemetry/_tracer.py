"""RunTracer: the run span, attempt spans and run events of runs."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from datetime import datetime
from importlib import metadata
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from azync_flow import _metrics
from azync_flow.telemetry import _run_span
from azync_flow.telemetry._attempt import AttemptRecorder, AttemptSpan
from azync_flow.telemetry._carrier import context_from_carrier
from azync_flow.telemetry._names import (
    ATTR_ATTEMPT,
    ATTR_DAG_NAME,
    ATTR_KIND,
    ATTR_RUN_ID,
    ATTR_SEQ,
    ATTR_STATE,
    ATTR_TASK_KEY,
    ATTR_WORKFLOW_NAME,
    INSTRUMENTATION_NAME,
    LEASE_EXPIRED,
    AttemptKind,
    AttemptOutcome,
    RunEvent,
    RunKind,
)


@functools.cache
def _package_version() -> str:
    # Read once: the metadata lookup parses files on disk, and it runs per run span.
    try:
        return metadata.version("azync-flow")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0+unknown"


def _run_id_str(run_id: UUID | str) -> str:
    return str(run_id)


def _ns(at: datetime | None) -> int | None:
    return None if at is None else _run_span.to_ns(at)


def _run_attributes(kind: RunKind, name: str, run_id: UUID | str) -> dict[str, AttributeValue]:
    return {
        ATTR_RUN_ID: _run_id_str(run_id),
        ATTR_KIND: kind.value,
        ATTR_WORKFLOW_NAME if kind is RunKind.WORKFLOW else ATTR_DAG_NAME: name,
    }


class RunTracer:
    """Creates the spans of runs on one tracer provider.

    Workers, clients and runtimes hold one instance, built from the
    ``tracer_provider`` option they accept (``None`` = the global provider,
    resolved lazily, so configuring it after import works).

    Args:
        tracer_provider: Provider to use; ``None`` for the application's global one.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._provider = tracer_provider
        self._tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, _package_version(), tracer_provider=tracer_provider
        )
        self._resolved: tuple[trace.TracerProvider, trace.Tracer] | None = None
        self._derived: dict[str, dict[str, str]] = {}

    def _concrete(self) -> trace.Tracer:
        """The provider's own tracer (not the global proxy), for run spans."""
        provider = self._provider or trace.get_tracer_provider()
        resolved = self._resolved
        if resolved is None or resolved[0] is not provider:
            resolved = self._resolved = (
                provider,
                provider.get_tracer(INSTRUMENTATION_NAME, _package_version()),
            )
        return resolved[1]

    def run_carrier(
        self, carrier: Mapping[str, str] | None, run_id: UUID | str
    ) -> Mapping[str, str] | None:
        """The run's stored carrier, or, when it holds no trace context (the run
        was started by a process without tracing), one derived from the run id:
        the same trace id and run span id in every process
        (:func:`~azync_flow.telemetry.run_span_id`), sampled as this process's
        sampler decides for that trace id. So the run still gets one trace and
        a run span, exported by whichever traced process ends it.

        Args:
            carrier: The run's ``trace_context`` (or an operation's meta).
            run_id: The execution or DAG id.

        Returns:
            ``carrier`` when it has a ``traceparent`` or this process has no
            OpenTelemetry SDK provider (nothing would be recorded), else the
            derived carrier.
        """
        if carrier and "traceparent" in carrier:
            return carrier
        key = str(run_id)
        derived = self._derived.get(key)
        if derived is None:
            sdk = _run_span.sdk_tracer(self._concrete())
            if sdk is None:
                return carrier
            if len(self._derived) > 4096:
                self._derived.clear()
            derived = self._derived[key] = _run_span.derive(sdk, run_id)
        return derived

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
        """Reserve the run's span and return the carrier to store with the run.

        The run span (``workflow <name>`` or ``dag <name>``) covers the whole
        run. It is not exported now: its span id is derived from ``run_id``,
        its trace id and sampling decision are fixed here, and it is exported
        once, whole, by :meth:`end_run_span` when the run finishes. It joins
        the caller's trace as a root span linked to the caller's active span
        (the run outlives the caller's span, so it cannot be its child); with
        no active span it starts a new trace. Every attempt and run event
        names it as parent through the carrier.

        Args:
            kind: Workflow or DAG.
            name: Registered workflow or DAG name (low cardinality).
            run_id: The execution or DAG id.
            attributes: Extra attributes for the sampler (the exported span
                carries those given to :meth:`end_run_span`).

        Returns:
            The W3C carrier naming the run span (``traceparent``), plus the
            caller's span id under ``azync-run-caller``: store it with the run
            (the ``trace_context`` column). Without an OpenTelemetry SDK
            provider it is the caller's own context, or ``{}`` when the caller
            has none (the run then has no run span). A run the sampler dropped
            has the sampled flag off, so its attempts are dropped consistently.
        """
        attrs = _run_attributes(kind, name, run_id)
        attrs.update(attributes or {})
        return _run_span.reserve(self._concrete(), f"{kind.value} {name}", run_id, attrs)

    def end_run_span(
        self,
        kind: RunKind,
        name: str,
        run_id: UUID | str,
        *,
        carrier: Mapping[str, str] | None,
        started_at: datetime,
        state: str,
        error: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> bool:
        """Export the run span of a finished run, from its start until now.

        Call it once per run, after the transaction that made the run terminal
        committed, and after the attempt span of that last step ended (so the
        run span ends after every attempt). Only the process whose commit won
        calls it, so the span is exported once however many workers took part.

        Args:
            kind: Workflow or DAG.
            name: Workflow or DAG name.
            run_id: The execution or DAG id.
            carrier: The run's stored carrier (what :meth:`start_run_span` returned).
            started_at: When the run started (the run row's ``created_at``,
                timezone-aware).
            state: The terminal state, recorded as ``azync.state``.
            error: For a failed run, the failure reason: the span's status is
                ``ERROR`` with it. None: status unset.
            attributes: Extra span attributes.

        Returns:
            True when the span was exported; False when the carrier reserved
            no run span for ``run_id`` (started without an SDK provider), the
            run is not sampled, or this process has no SDK provider.

        Raises:
            ValueError: ``started_at`` is naive.
        """
        attrs = _run_attributes(kind, name, run_id)
        attrs[ATTR_STATE] = state
        attrs.update(attributes or {})
        return _run_span.emit(
            self._concrete(),
            self.run_carrier(carrier, run_id),
            f"{kind.value} {name}",
            run_id,
            started_at=started_at,
            attributes=attrs,
            error=error,
            instrumentation=(INSTRUMENTATION_NAME, _package_version()),
        )

    def lost_attempt(
        self,
        kind: AttemptKind,
        name: str,
        *,
        carrier: Mapping[str, str] | None,
        run_id: UUID | str,
        attempt: int,
        started_at: datetime | None,
        outcome: AttemptOutcome,
        workflow_name: str | None = None,
        dag_name: str | None = None,
        task_key: str | None = None,
        seq: int | None = None,
    ) -> None:
        """Close the span of an attempt lost to lease expiry (its worker died or stalled).

        The lost worker never ended its own span, so nothing of the attempt was
        exported; the reaper writes it instead: the same name and attributes as
        the attempt's span, from the attempt's start (the lease time) until
        now, status ``ERROR`` ``lease expired``.

        Args:
            kind: What the attempt executed.
            name: As for :meth:`attempt_span`.
            carrier: The run's stored carrier.
            run_id: The execution or DAG id.
            attempt: The lost attempt's number.
            started_at: When it was leased (the job's ``started_at``); None: now.
            outcome: What the reaper did: ``RETRIED`` (runs again), ``DEAD``
                (given up) or ``UNCERTAIN`` (parked for a decision).
            workflow_name: Workflow name (``azync.workflow.name``).
            dag_name: DAG name (``azync.dag.name``).
            task_key: DAG task key.
            seq: History seq of the command.
        """
        span = self.attempt_span(
            kind,
            name,
            carrier=carrier,
            run_id=run_id,
            attempt=attempt,
            workflow_name=workflow_name,
            dag_name=dag_name,
            task_key=task_key,
            seq=seq,
            start_time=None
            if started_at is None
            else min(_run_span.to_ns(started_at), time.time_ns()),
        )
        with span:
            span.set_outcome(outcome)
            span.span.set_status(Status(StatusCode.ERROR, LEASE_EXPIRED))
            span.add_event(LEASE_EXPIRED)
        _metrics.reaped(kind.value, outcome.value)

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
        start_time: int | None = None,
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
            start_time: Start in nanoseconds since the epoch (None: now).

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
        if kind is not AttemptKind.JOB:
            carrier = self.run_carrier(carrier, run_id)
        parent = context_from_carrier(carrier)
        span = self._tracer.start_span(
            f"{kind.value} {name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            start_time=start_time,
        )
        return AttemptSpan(
            span,
            parent,
            _recorder(kind, name, workflow_name, dag_name),
            timed=start_time is None,
        )

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
        of the run span. When the calling code has an active span of a
        different trace (a client sending a signal from its own request), the
        event span links to it.

        Args:
            carrier: The run's stored trace context.
            event: What happened.
            run_id: The execution or DAG id.
            subject: Low-cardinality detail for the name: the signal name, the
                operation name; never an id.
            attributes: Extra attributes (seq, task key, resolution, ...).
            at: When it happened (UTC-aware); now when omitted. With ``at``
                the span has zero duration.

        Raises:
            ValueError: ``at`` is a naive datetime.
        """
        attrs: dict[str, AttributeValue] = {
            ATTR_RUN_ID: _run_id_str(run_id),
            ATTR_KIND: event.value,
        }
        attrs.update(attributes or {})
        if event is RunEvent.UNCERTAIN_RESOLVED and attributes is not None:
            # the one place every resolution of an uncertain operation passes
            _metrics.uncertain_resolved(subject or "", str(attributes.get("azync.resolution", "")))
        parent = context_from_carrier(self.run_carrier(carrier, run_id))
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


def _recorder(
    kind: AttemptKind, name: str, workflow_name: str | None, dag_name: str | None
) -> AttemptRecorder | None:
    """The metrics of one attempt (queue jobs are counted by the worker's runner)."""
    if kind is AttemptKind.JOB:
        return None

    def record(outcome: str, seconds: float | None) -> None:
        _metrics.attempt_ended(
            kind.value, name, outcome, seconds, workflow_name=workflow_name, dag_name=dag_name
        )

    return record


def _caller_link(parent: otel_context.Context) -> list[Link]:
    current = trace.get_current_span().get_span_context()
    if not current.is_valid:
        return []
    if current.trace_id == trace.get_current_span(parent).get_span_context().trace_id:
        return []
    return [Link(current)]


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
