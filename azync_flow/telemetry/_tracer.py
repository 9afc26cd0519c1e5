"""RunTracer: the start span, attempt spans and run events of runs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from importlib import metadata
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import AttributeValue

from azync_flow.telemetry._attempt import AttemptSpan
from azync_flow.telemetry._carrier import capture_trace_context, context_from_carrier
from azync_flow.telemetry._names import (
    ATTR_ATTEMPT,
    ATTR_DAG_NAME,
    ATTR_KIND,
    ATTR_RUN_ID,
    ATTR_SEQ,
    ATTR_TASK_KEY,
    ATTR_WORKFLOW_NAME,
    INSTRUMENTATION_NAME,
    AttemptKind,
    RunEvent,
    RunKind,
)


def _package_version() -> str:
    try:
        return metadata.version("azync-flow")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0+unknown"


def _run_id_str(run_id: UUID | str) -> str:
    return str(run_id)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(at: datetime | None) -> int | None:
    """Nanoseconds since the epoch of a UTC-aware datetime (exact)."""
    if at is None:
        return None
    if at.tzinfo is None:
        raise ValueError("run_event(at=...) needs a timezone-aware datetime (UTC)")
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


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
