"""Spans for plain queue jobs: one ``job <kind>`` attempt span per handler call,
a child of the enqueuer's span (trace context carried in ``job.meta``).

Enqueue with :func:`traced_meta` (``Client.enqueue`` does it for you); turn the
spans on in a worker with ``trace_jobs(worker)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from azync_flow.errors import Skip, Snooze
from azync_flow.retry import RetryDecision
from azync_flow.telemetry._flush import flush_spans_on_stop
from azync_flow.telemetry._names import AttemptKind, AttemptOutcome
from azync_flow.telemetry._tracer import RunTracer
from azync_flow.worker import JobContext, Worker

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["job_span_interceptor", "trace_jobs"]


def trace_jobs(worker: Worker, tracer_provider: TracerProvider | None = None) -> None:
    """Record every queue handler attempt of ``worker`` as a ``job <kind>`` span,
    a child of the enqueuer's span when its trace context is in ``job.meta``
    (see ``Client.enqueue`` / :func:`traced_meta`).

    Args:
        worker: the Worker whose handlers are traced (call before it starts).
        tracer_provider: OpenTelemetry provider (None = the global one); its
            buffered spans are flushed when the worker stops gracefully.
    """
    worker.add_interceptor(job_span_interceptor(worker, tracer_provider))
    flush_spans_on_stop(worker, tracer_provider)


def job_span_interceptor(
    worker: Any, tracer_provider: TracerProvider | None = None
) -> Callable[[JobContext, Callable[[], Awaitable[None]]], Awaitable[None]]:
    """A Worker interceptor recording each queue handler attempt as a span.

    AttemptOutcome: ``succeeded``; ``snoozed`` (with the delay); ``skipped``;
    ``retried`` or ``dead`` as the handler's retry policy decides for the
    raised error (the error is recorded on the span).
    """
    tracer = RunTracer(tracer_provider)

    async def intercept(ctx: JobContext, call_next: Callable[[], Awaitable[None]]) -> None:
        async with tracer.attempt_span(
            AttemptKind.JOB, ctx.kind, carrier=ctx.meta, run_id=ctx.id, attempt=ctx.attempt
        ) as span:
            try:
                await call_next()
            except Snooze as snooze:
                span.set_outcome(AttemptOutcome.SNOOZED, retry_delay=snooze.delay)
                raise
            except Skip:
                span.set_outcome(AttemptOutcome.SKIPPED)
                raise
            except Exception as exc:
                span.record_failure(exc)
                handler = worker.handlers.get(ctx.kind)
                retry = handler.retry if handler is not None else None
                decision = (
                    retry.decide(exc, ctx.attempt, ctx.max_attempts)
                    if retry is not None
                    else RetryDecision.DEAD
                )
                if decision is RetryDecision.RETRY:
                    span.set_outcome(AttemptOutcome.RETRIED)
                else:
                    span.set_outcome(AttemptOutcome.DEAD)
                raise
            span.set_outcome(AttemptOutcome.SUCCEEDED)

    return intercept
