"""The run span: reserved when a run starts, exported once when it finishes.

A run outlives processes (crashes, hours of timers), so its span cannot be an
open in-memory span. Instead its ids are fixed at the start and the span is
written, whole, by whichever process commits the run's terminal outcome:

* the span id is derived from the run id (:func:`run_span_id`), so every
  attempt on any worker names it as parent before it exists;
* the trace id and the sampling decision are taken at the start and stored in
  the run's carrier (``traceparent``), together with the caller's span id
  (:data:`RUN_CALLER_KEY`).

The run span is a root span in the caller's trace, linked to the caller's
span rather than its child: the run outlives the request that started it, and
a child may not end after its parent.

Writing a span with given ids is not part of the OpenTelemetry API, so the
run span needs the OpenTelemetry SDK's tracer (any ``opentelemetry.sdk``
``TracerProvider``). With another provider, or none, the run has no run span:
the carrier is the caller's own context and attempts are its children.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from azync_flow.telemetry._carrier import capture_trace_context, context_from_carrier

#: Carrier key holding the caller's span id (16 hex digits): the run span links to it.
RUN_CALLER_KEY = "azync-run-caller"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def run_span_id(run_id: UUID | str) -> int:
    """The span id of a run's run span: 64 bits of SHA-256 of the run id, never 0.

    Args:
        run_id: The execution or DAG id.

    Returns:
        The span id as an int (what ``SpanContext.span_id`` holds).
    """
    digest = hashlib.sha256(b"azync-run-span:" + str(run_id).encode()).digest()
    return int.from_bytes(digest[:8]) or 1


def run_trace_id(run_id: UUID | str) -> int:
    """The trace id of a run started without a trace context (by a process
    without tracing): 128 bits of SHA-256 of the run id, never 0."""
    digest = hashlib.sha256(b"azync-run-trace:" + str(run_id).encode()).digest()
    return int.from_bytes(digest[:16]) or 1


def derive(sdk: Any, run_id: UUID | str) -> dict[str, str]:
    """The carrier of a run that was started without one: its run span
    (:func:`run_span_id`) in the trace :func:`run_trace_id`, sampled as
    ``sdk``'s sampler decides for that trace (every process with the same
    sampler configuration decides alike)."""
    trace_id = run_trace_id(run_id)
    decision = sdk.sampler.should_sample(
        otel_context.Context(), trace_id, "run", SpanKind.INTERNAL, {}, ()
    )
    flags = trace.TraceFlags(
        trace.TraceFlags.SAMPLED if decision.decision.is_sampled() else trace.TraceFlags.DEFAULT
    )
    reserved = trace.SpanContext(
        trace_id,
        run_span_id(run_id),
        is_remote=True,
        trace_flags=flags,
        trace_state=decision.trace_state,
    )
    return capture_trace_context(
        trace.set_span_in_context(trace.NonRecordingSpan(reserved), otel_context.Context())
    )


def to_ns(at: datetime) -> int:
    """Nanoseconds since the epoch of a timezone-aware datetime (exact to the microsecond).

    Raises:
        ValueError: ``at`` is naive.
    """
    if at.tzinfo is None:
        raise ValueError("span timestamps need a timezone-aware datetime (UTC)")
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


def sdk_tracer(tracer: trace.Tracer) -> Any | None:
    """``tracer`` if it is an OpenTelemetry SDK tracer (the SDK already imported), else None."""
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    if sdk is None or not isinstance(tracer, sdk.Tracer):
        return None
    return tracer


def reserve(
    tracer: trace.Tracer,
    name: str,
    run_id: UUID | str,
    attributes: Mapping[str, AttributeValue],
) -> dict[str, str]:
    """The carrier of a run whose run span is reserved (see the module docstring).

    The run joins the caller's trace (none: a fresh trace id) and its span
    will link to the caller's span. The SDK's sampler decides once, here,
    with the caller's span as parent context (``ParentBased`` follows it).
    """
    sdk = sdk_tracer(tracer)
    current = otel_context.get_current()
    caller = trace.get_current_span(current).get_span_context()
    if sdk is None:
        return capture_trace_context(current)
    trace_id = caller.trace_id if caller.is_valid else sdk.id_generator.generate_trace_id()
    decision = sdk.sampler.should_sample(
        current, trace_id, name, SpanKind.INTERNAL, dict(attributes), ()
    )
    flags = trace.TraceFlags(
        trace.TraceFlags.SAMPLED if decision.decision.is_sampled() else trace.TraceFlags.DEFAULT
    )
    reserved = trace.SpanContext(
        trace_id,
        run_span_id(run_id),
        is_remote=False,
        trace_flags=flags,
        trace_state=decision.trace_state or caller.trace_state,
    )
    carrier = capture_trace_context(
        trace.set_span_in_context(trace.NonRecordingSpan(reserved), current)
    )
    if caller.is_valid:
        carrier[RUN_CALLER_KEY] = f"{caller.span_id:016x}"
    return carrier


def emit(
    tracer: trace.Tracer,
    carrier: Mapping[str, str] | None,
    name: str,
    run_id: UUID | str,
    *,
    started_at: datetime,
    attributes: Mapping[str, AttributeValue],
    error: str | None,
    instrumentation: tuple[str, str],
) -> bool:
    """Export the run span reserved in ``carrier``, ending now. Returns True when exported.

    Nothing is exported when ``carrier`` did not reserve this run's span (a
    run started without the SDK), when the run is not sampled, or when
    ``tracer`` is not an SDK tracer.
    """
    sdk = sdk_tracer(tracer)
    reserved = trace.get_current_span(context_from_carrier(carrier)).get_span_context()
    if (
        sdk is None
        or not reserved.is_valid
        or reserved.span_id != run_span_id(run_id)
        or not reserved.trace_flags.sampled
    ):
        return False
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    caller_hex = (carrier or {}).get(RUN_CALLER_KEY, "")
    links = []
    if caller_hex:
        caller = trace.SpanContext(
            reserved.trace_id,
            int(caller_hex, 16),
            is_remote=True,
            trace_flags=reserved.trace_flags,
            trace_state=reserved.trace_state,
        )
        links.append(trace.Link(caller))
    own = trace.SpanContext(
        reserved.trace_id,
        reserved.span_id,
        is_remote=False,
        trace_flags=reserved.trace_flags,
        trace_state=reserved.trace_state,
    )
    end = time.time_ns()
    span = ReadableSpan(
        name=name,
        context=own,
        parent=None,
        resource=sdk.resource,
        links=links,
        attributes=dict(attributes),
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR, error) if error is not None else Status(StatusCode.UNSET),
        start_time=min(to_ns(started_at), end),
        end_time=end,
        instrumentation_scope=InstrumentationScope(*instrumentation),
    )
    sdk.span_processor.on_end(span)
    return True
