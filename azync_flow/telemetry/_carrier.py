"""The run's stored trace context: W3C carrier in, parent context out."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# The stored carrier must read the same in every process whatever propagators
# the application configured globally, so the format is fixed: W3C Trace
# Context (traceparent, tracestate) plus W3C Baggage.
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

# The context key that OpenTelemetry instrumentations check before creating
# spans (opentelemetry.instrumentation.utils.is_instrumentation_enabled).
_SUPPRESS_INSTRUMENTATION_KEY: str = otel_context._SUPPRESS_INSTRUMENTATION_KEY


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


def traced_meta(meta: Mapping[str, str] | None = None) -> dict[str, str]:
    """``meta`` plus the caller's W3C trace context (``traceparent``/``tracestate``),
    for a job or event whose handler's span should join the caller's trace.

    Args:
        meta: the caller's own meta; its keys win over the trace context's.

    Returns:
        A new dict.
    """
    return {**capture_trace_context(), **(meta or {})}


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
    return _extract(tuple(sorted(carrier.items())))


@functools.lru_cache(maxsize=4096)
def _extract(items: tuple[tuple[str, str], ...]) -> otel_context.Context:
    # A run's carrier is read for every attempt of the run: parse it once. The
    # context is an immutable mapping, so one instance may be shared.
    return _PROPAGATOR.extract(dict(items), context=otel_context.Context())


def suppressed_context(base: otel_context.Context | None = None) -> otel_context.Context:
    """A context in which spans are not recorded (for workflow code).

    Its current span is a non-recording, *unsampled* span (same trace and
    span id as the span current in ``base``, or random ids when there is none),
    and it carries the ``suppress_instrumentation`` flag that OpenTelemetry
    instrumentations honour. Under the SDK's default ``ParentBased`` sampler a
    span started in it is dropped. Spans started with an explicit parent
    context (every azync_flow attempt span) are not affected.

    The workflow runtime creates the workflow's root task with
    ``loop.create_task(coro, context=suppressed_context())`` so that workflow
    code, which is replayed, never emits spans, whether a pass replays or runs
    live, and whatever instance cache is in use.

    Args:
        base: Context to derive from; the current context when omitted.
    """
    current = trace.get_current_span(base).get_span_context()
    valid = current.is_valid
    unsampled = trace.SpanContext(
        trace_id=current.trace_id if valid else int.from_bytes(os.urandom(16)) or 1,
        span_id=current.span_id if valid else int.from_bytes(os.urandom(8)) or 1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
        trace_state=current.trace_state,
    )
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(unsampled), base)
    return otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True, ctx)


@contextmanager
def suppress_spans() -> Iterator[None]:
    """Attach :func:`suppressed_context` for the duration of the block."""
    token = otel_context.attach(suppressed_context())
    try:
        yield
    finally:
        otel_context.detach(token)
