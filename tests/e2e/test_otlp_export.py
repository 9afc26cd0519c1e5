"""End-to-end export: real processes, the real OTLP exporters, a local receiver.

Each role (the caller that starts the run, the workers that run attempts) is
its own Python process that calls ``configure_otlp`` and uses azync_flow's
telemetry on the global provider; the run's trace context crosses process
boundaries as JSON, as it does through the ``trace_context`` column. One
worker is killed mid-attempt (``os._exit``), as a crash would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from azync_flow.otlp import configure_otlp
from azync_flow.telemetry import AttemptKind, AttemptOutcome, RunKind, RunTracer, run_span_id
from azync_flow.testing_otel import (
    OtlpHttpReceiver,
    ReceivedSpan,
    decode_request,
    nesting_violations,
)

REPO = Path(__file__).resolve().parents[2]

ROLE = textwrap.dedent(
    """
    import json, os, sys
    from datetime import UTC, datetime, timedelta
    from opentelemetry import trace
    from azync_flow import telemetry as t
    from azync_flow.otlp import configure_otlp

    role, endpoint, run_id = sys.argv[1], sys.argv[2], sys.argv[3]
    configure_otlp(service_name=role, endpoint=endpoint)
    user = trace.get_tracer("user-code")

    class ChargeDeclinedError(Exception):
        pass

    if role == "api":
        with user.start_as_current_span("POST /orders") as req:
            carrier = t.start_run_span(t.RunKind.WORKFLOW, "order", run_id)
        print(json.dumps(carrier))
        sys.exit(0)

    carrier = json.loads(sys.stdin.read())
    common = dict(carrier=carrier, run_id=run_id, workflow_name="order")
    if role == "worker-1":
        for attempt in (1, 2):
            with t.attempt_span(t.AttemptKind.ACTIVITY, "charge", attempt=attempt, seq=2,
                                **common) as att:
                with user.start_as_current_span("POST /charge"):
                    pass
                if attempt == 1:
                    att.record_failure(ChargeDeclinedError("card declined"))
                    att.set_outcome(t.AttemptOutcome.RETRIED, retry_delay=2.5)
                else:
                    att.set_outcome(t.AttemptOutcome.SUCCEEDED)
    elif role == "worker-2":
        att = t.attempt_span(t.AttemptKind.ACTIVITY, "ship", attempt=1, seq=3, **common)
        with att:
            with user.start_as_current_span("POST /ship"):
                pass
            os._exit(137)  # killed mid-attempt: nothing of this process is exported
    elif role == "worker-3":
        tracer = t.default_run_tracer()
        started = datetime.now(UTC) - timedelta(seconds=1)
        # the reaper closes worker-2's lost attempt, then the retry runs
        tracer.lost_attempt(t.AttemptKind.ACTIVITY, "ship", attempt=1, seq=3,
                            started_at=started, outcome=t.AttemptOutcome.RETRIED, **common)
        with t.attempt_span(t.AttemptKind.ACTIVITY, "ship", attempt=2, seq=3, **common) as att:
            att.set_outcome(t.AttemptOutcome.SUCCEEDED)
        # this worker committed the run's completion: it exports the run span
        # (from the run's recorded start: the api role ran well within the last minute)
        tracer.end_run_span(t.RunKind.WORKFLOW, "order", run_id, carrier=carrier,
                            started_at=started - timedelta(minutes=1), state="succeeded")
    """
)


def _role(
    role: str, endpoint: str, run_id: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", ROLE, role, endpoint, run_id],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _one(spans: list[ReceivedSpan], name: str, **attrs: object) -> ReceivedSpan:
    found = [
        s
        for s in spans
        if s.name == name and all(s.attributes.get(k) == v for k, v in attrs.items())
    ]
    assert len(found) == 1, (name, attrs, [(s.name, s.attributes) for s in spans])
    return found[0]


def test_run_spans_from_several_processes_reach_the_receiver_as_one_trace() -> None:
    run_id = str(uuid.uuid4())
    with OtlpHttpReceiver() as rx:
        api = _role("api", rx.endpoint, run_id)
        assert api.returncode == 0, api.stderr
        stored = api.stdout.strip()
        w1 = _role("worker-1", rx.endpoint, run_id, stored)
        assert w1.returncode == 0, w1.stderr
        w2 = _role("worker-2", rx.endpoint, run_id, stored)
        assert w2.returncode == 137, w2.stderr
        w3 = _role("worker-3", rx.endpoint, run_id, stored)
        assert w3.returncode == 0, w3.stderr
        spans = rx.wait_for(lambda s: len(s) >= 8)

    request = _one(spans, "POST /orders")
    start = _one(spans, "workflow order")
    assert request.parent_span_id is None
    assert start.parent_span_id is None
    assert start.links == [(request.trace_id, request.span_id)]
    assert start.kind == PbSpan.SPAN_KIND_INTERNAL
    assert start.service_name == "worker-3"
    assert start.attributes == {
        "azync.run_id": run_id,
        "azync.kind": "workflow",
        "azync.workflow.name": "order",
        "azync.state": "succeeded",
    }
    assert json.loads(stored)["traceparent"].split("-")[1:3] == [
        f"{start.trace_id:032x}",
        f"{start.span_id:016x}",
    ]

    first = _one(spans, "activity charge", **{"azync.attempt": 1})
    second = _one(spans, "activity charge", **{"azync.attempt": 2})
    assert first.attributes["azync.outcome"] == "retried"
    assert first.attributes["azync.retry_delay_s"] == 2.5
    assert first.status_code == PbStatus.STATUS_CODE_ERROR
    assert first.status_message == "ChargeDeclinedError: card declined"
    [(event, attrs)] = first.events
    assert event == "exception"
    assert attrs["exception.type"] == "__main__.ChargeDeclinedError"
    assert attrs["exception.message"] == "card declined"
    assert second.attributes["azync.outcome"] == "succeeded"
    assert second.status_code == PbStatus.STATUS_CODE_UNSET
    assert {first.kind, second.kind} == {PbSpan.SPAN_KIND_CONSUMER}
    assert second.scope_name == "azync_flow"

    http_calls = [s for s in spans if s.name == "POST /charge"]
    assert sorted(s.parent_span_id for s in http_calls) == sorted([first.span_id, second.span_id])

    # The killed worker exported nothing; the reaper's closing span and the retry did.
    assert [s for s in spans if s.service_name == "worker-2"] == []
    assert [s for s in spans if s.name == "POST /ship"] == []
    lost = _one(spans, "activity ship", **{"azync.attempt": 1})
    assert (lost.status_code, lost.status_message) == (
        PbStatus.STATUS_CODE_ERROR,
        "lease expired",
    )
    ship = _one(spans, "activity ship", **{"azync.attempt": 2})
    assert nesting_violations(spans) == []

    assert {s.trace_id for s in spans} == {request.trace_id}
    for s in (first, second, lost, ship):
        assert s.parent_span_id == start.span_id, s.name
        assert s.attributes["azync.run_id"] == run_id
    assert {s.service_name for s in spans} == {"api", "worker-1", "worker-3"}
    assert len(spans) == 8


def test_environment_variables_configure_endpoint_headers_compression_and_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OtlpHttpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0k")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "orders-from-env")
        provider = configure_otlp(set_global=False)
        try:
            carrier = RunTracer(provider).start_run_span(RunKind.DAG, "booking", "d1")
            with RunTracer(provider).attempt_span(
                AttemptKind.DAG_TASK, "reserve", carrier=carrier, run_id="d1", attempt=1
            ) as att:
                att.set_outcome(AttemptOutcome.SKIPPED)
            assert provider.force_flush(10_000)
            spans = rx.wait_for(lambda s: len(s) >= 1)
        finally:
            provider.shutdown()
    assert {s.service_name for s in spans} == {"orders-from-env"}
    assert rx.headers[0]["content-encoding"] == "gzip"
    assert rx.headers[0]["authorization"] == "Bearer t0k"
    task = _one(spans, "dag.task reserve")
    assert task.parent_span_id == run_span_id("d1")
    assert task.attributes["azync.outcome"] == "skipped"


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans.extend(decode_request(request))
        return trace_service_pb2.ExportTraceServiceResponse()


def test_grpc_protocol_exports_to_an_otlp_grpc_collector() -> None:
    from concurrent.futures import ThreadPoolExecutor

    collector = _Collector()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        provider = configure_otlp(
            service_name="grpc-worker",
            protocol="grpc",
            endpoint=f"http://127.0.0.1:{port}",
            set_global=False,
        )
        tracer = RunTracer(provider)
        carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r9")
        with tracer.attempt_span(
            AttemptKind.WORKFLOW_TASK, "order", carrier=carrier, run_id="r9", attempt=1
        ) as att:
            att.set_pass_stats(history_length=3, events_replayed=3, new_commands=1)
        assert provider.force_flush(10_000)
        provider.shutdown()
    finally:
        server.stop(grace=None)
    task = _one(collector.spans, "workflow.task order")
    assert task.parent_span_id == run_span_id("r9")
    assert task.attributes["azync.events_replayed"] == 3
    assert task.service_name == "grpc-worker"
