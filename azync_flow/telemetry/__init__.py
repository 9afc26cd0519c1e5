"""OpenTelemetry spans for runs: one trace per run, one span per attempt.

This module depends on ``opentelemetry-api`` only. Spans go to whatever
``TracerProvider`` the application configured (the global one by default, or
the one handed to :class:`RunTracer`); nothing here installs a provider. With
no provider configured every call is a cheap no-op.

Integration points (see ``docs/tracing.md`` for the full rules):

* **Start of a run** (``start_workflow``/``start_dag``, in the caller's process)::

      carrier = run_tracer.start_run_span(RunKind.WORKFLOW, "order", run_id)
      # store `carrier` (dict[str, str]) in the run row's trace_context column

* **End of a run** (whichever process committed the terminal outcome)::

      run_tracer.end_run_span(RunKind.WORKFLOW, "order", run_id, carrier=carrier,
                              started_at=row.created_at, state="succeeded")

  or ``end_finished_run(run_tracer, kind, name, run_id, carrier, created_at,
  state, reason)``, which every path ending a run calls: status ERROR for a
  failed or terminated run, and it never raises.

* **Each attempt** (worker, any process, any time later)::

      async with run_tracer.attempt_span(
          AttemptKind.ACTIVITY, "charge", carrier=row.trace_context,
          run_id=run_id, workflow_name="order", seq=7, attempt=job.attempt,
      ) as span:
          try:
              result = await handler(...)      # user spans nest under `span`
          except Exception as exc:
              span.record_failure(exc)
              span.set_outcome(AttemptOutcome.RETRIED, retry_delay=delay)
          else:
              span.set_outcome(AttemptOutcome.SUCCEEDED)

* **Run events** (signals, timer firings, uncertain resolutions, cancellations)::

      run_tracer.run_event(carrier, RunEvent.SIGNAL, run_id=run_id, subject="approve")

A run started by a process without tracing (an empty carrier) still gets one
trace: every process derives its trace id (:func:`run_trace_id`) and run span
id (:func:`run_span_id`) from the run id.

Metrics (``azync_flow._metrics``, docs/metrics.md) are recorded at the same
points: an attempt span's end counts the attempt and its latency,
``end_finished_run`` the run's end. :mod:`azync_flow.telemetry.metrics`
exports them (Prometheus, OTLP).

Buffered spans (an SDK ``BatchSpanProcessor`` exports every few hundred ms)
leave the process with :func:`flush_spans`; every place that turns tracing on
for a worker registers it as a stop hook (:func:`flush_spans_on_stop`), so a
gracefully stopped worker sends all its spans.

Replay rule: only the attempt that actually executes makes a span. A workflow
task (replay pass) makes exactly one ``workflow.task`` span whatever it
replays; the runtime never opens a span for a step it finds in history, and
workflow code runs in :func:`suppressed_context` so that spans it creates
(replayed or live) are dropped.
"""

from azync_flow.telemetry._attempt import AttemptSpan
from azync_flow.telemetry._carrier import (
    capture_trace_context,
    context_from_carrier,
    suppress_spans,
    suppressed_context,
    traced_meta,
)
from azync_flow.telemetry._flush import flush_spans, flush_spans_on_stop
from azync_flow.telemetry._jobs import job_span_interceptor, trace_jobs
from azync_flow.telemetry._names import (
    ATTR_ATTEMPT,
    ATTR_DAG_NAME,
    ATTR_EVENTS_REPLAYED,
    ATTR_HISTORY_LENGTH,
    ATTR_KIND,
    ATTR_NEW_COMMANDS,
    ATTR_OUTCOME,
    ATTR_RETRY_DELAY_S,
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
from azync_flow.telemetry._run_end import end_finished_run
from azync_flow.telemetry._run_span import RUN_CALLER_KEY, run_span_id, run_trace_id
from azync_flow.telemetry._tracer import (
    RunTracer,
    attempt_span,
    default_run_tracer,
    run_event,
    start_run_span,
)

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
    "ATTR_STATE",
    "ATTR_TASK_KEY",
    "ATTR_WORKFLOW_NAME",
    "INSTRUMENTATION_NAME",
    "LEASE_EXPIRED",
    "RUN_CALLER_KEY",
    "AttemptKind",
    "AttemptOutcome",
    "AttemptSpan",
    "RunEvent",
    "RunKind",
    "RunTracer",
    "attempt_span",
    "capture_trace_context",
    "context_from_carrier",
    "default_run_tracer",
    "end_finished_run",
    "flush_spans",
    "flush_spans_on_stop",
    "job_span_interceptor",
    "run_event",
    "run_span_id",
    "run_trace_id",
    "start_run_span",
    "suppress_spans",
    "suppressed_context",
    "trace_jobs",
    "traced_meta",
]
