"""The public surface of azync_flow.telemetry is pinned: a refactor cannot change it by accident."""

from __future__ import annotations

import azync_flow.telemetry as telemetry


def test_telemetry_exports_exactly_the_documented_names() -> None:
    assert telemetry.__all__ == [
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
    # "@py_builtins"/"@pytest_ar": pytest rewrites asserts in the modules of a
    # distribution that registers a pytest plugin, as azync_flow does
    public = {n for n in dir(telemetry) if not n.startswith(("_", "@"))}
    # "metrics": the public submodule (metric export), once something imported it
    assert public - {"annotations", "metrics"} == set(telemetry.__all__)


def test_span_names_and_outcomes_are_the_documented_values() -> None:
    assert [k.value for k in telemetry.AttemptKind] == [
        "workflow.task",
        "activity",
        "dag.task",
        "dag.compensation",
        "job",
    ]
    assert [o.value for o in telemetry.AttemptOutcome] == [
        "succeeded",
        "retried",
        "dead",
        "snoozed",
        "skipped",
        "uncertain",
        "released",
    ]
    assert [e.value for e in telemetry.RunEvent] == [
        "signal",
        "timer.fired",
        "uncertain.resolved",
        "cancel.requested",
        "workflow.terminated",
    ]
