"""Span capture for tests of traced code (needs the ``otlp`` extra).

:class:`SpanCapture` keeps spans in memory; :class:`OtlpHttpReceiver` is a
local OTLP/HTTP endpoint that decodes what a real exporter sends.

Each :class:`SpanCapture` owns its own SDK ``TracerProvider`` writing
synchronously to an ``InMemorySpanExporter``, so a test can stand up several
"processes" (one capture each) without touching the global provider::

    capture = SpanCapture(service_name="worker-1")
    tracer = RunTracer(capture.provider)
    ...
    [span] = capture.named("activity charge")
    assert parent_id(span) == run_span_id
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = [
    "OtlpHttpReceiver",
    "ReceivedPoint",
    "ReceivedSpan",
    "SpanCapture",
    "decode_export_request",
    "decode_metrics_request",
    "decode_request",
    "nesting_violations",
    "parent_id",
    "span_ids",
    "trace_ids",
]


class SpanCapture:
    """A private SDK tracer provider that keeps every finished span in memory.

    Args:
        service_name: ``service.name`` resource attribute of the provider.
    """

    def __init__(self, service_name: str = "azync-flow-test") -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        """Finished spans in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """Finished spans with exactly this name, in the order they ended."""
        return [s for s in self.spans() if s.name == name]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()

    def shutdown(self) -> None:
        """Shut the provider down (later spans are dropped)."""
        self.provider.shutdown()


def span_ids(spans: Iterable[ReadableSpan]) -> list[int]:
    """The span ids of ``spans`` (0 for a span without context)."""
    return [s.context.span_id if s.context else 0 for s in spans]


def trace_ids(spans: Sequence[ReadableSpan]) -> set[int]:
    """The distinct trace ids of ``spans``."""
    return {s.context.trace_id for s in spans if s.context}


def parent_id(span: ReadableSpan) -> int | None:
    """The parent span id of ``span``; ``None`` for a root span."""
    return span.parent.span_id if span.parent else None


def nesting_violations(spans: Iterable[ReadableSpan | ReceivedSpan]) -> list[str]:
    """Spans that a trace viewer would draw outside their parent.

    A child must start no earlier and end no later than its parent. Only
    pairs where both spans are in ``spans`` are checked.

    Args:
        spans: Finished spans (from a :class:`SpanCapture` or an
            :class:`OtlpHttpReceiver`).

    Returns:
        One line per violation (``"<child> ends after <parent>"``); ``[]``
        when every child nests inside its parent.
    """
    timed = [_timed(s) for s in spans]
    by_id = {t[1]: t for t in timed}
    problems: list[str] = []
    for name, _, parent, start, end in timed:
        if parent is None or parent not in by_id:
            continue
        p_name, _, _, p_start, p_end = by_id[parent]
        if end > p_end:
            problems.append(f"{name} ends after {p_name} by {(end - p_end) / 1e6:.3f} ms")
        if start < p_start:
            problems.append(f"{name} starts before {p_name} by {(p_start - start) / 1e6:.3f} ms")
    return problems


def _timed(span: ReadableSpan | ReceivedSpan) -> tuple[str, int, int | None, int, int]:
    if isinstance(span, ReceivedSpan):
        return span.name, span.span_id, span.parent_span_id, span.start_time, span.end_time
    assert span.context is not None
    start, end = span.start_time or 0, span.end_time or 0
    return span.name, span.context.span_id, parent_id(span), start, end


@dataclass(frozen=True)
class ReceivedSpan:
    """A span as an OTLP receiver decoded it from the wire."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    kind: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[int, int]]
    service_name: str
    scope_name: str
    start_time: int = 0
    end_time: int = 0


def _any_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def _attrs(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in kvs}


def decode_export_request(body: bytes) -> list[ReceivedSpan]:
    """Decode a serialized ``ExportTraceServiceRequest`` into :class:`ReceivedSpan` s."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return decode_request(request)


def decode_request(request: Any) -> list[ReceivedSpan]:
    """Flatten a parsed ``ExportTraceServiceRequest`` into :class:`ReceivedSpan` s."""
    out: list[ReceivedSpan] = []
    for rs in request.resource_spans:
        service = str(_attrs(rs.resource.attributes).get("service.name", ""))
        for ss in rs.scope_spans:
            for sp in ss.spans:
                parent = int.from_bytes(sp.parent_span_id, "big") if sp.parent_span_id else None
                out.append(
                    ReceivedSpan(
                        name=sp.name,
                        trace_id=int.from_bytes(sp.trace_id, "big"),
                        span_id=int.from_bytes(sp.span_id, "big"),
                        parent_span_id=parent,
                        kind=sp.kind,
                        attributes=_attrs(sp.attributes),
                        status_code=sp.status.code,
                        status_message=sp.status.message,
                        events=[(e.name, _attrs(e.attributes)) for e in sp.events],
                        links=[
                            (int.from_bytes(lk.trace_id, "big"), int.from_bytes(lk.span_id, "big"))
                            for lk in sp.links
                        ],
                        service_name=service,
                        scope_name=ss.scope.name,
                        start_time=sp.start_time_unix_nano,
                        end_time=sp.end_time_unix_nano,
                    )
                )
    return out


@dataclass(frozen=True)
class ReceivedPoint:
    """One data point of a metric as an OTLP receiver decoded it.

    Attributes:
        name: the metric's name (``azync_flow.workflow.completed``).
        attributes: the point's attributes.
        value: a sum's or gauge's value, a histogram's count.
        service_name: ``service.name`` of the sender.
    """

    name: str
    attributes: dict[str, Any]
    value: float
    service_name: str


def decode_metrics_request(body: bytes) -> list[ReceivedPoint]:
    """Decode a serialized ``ExportMetricsServiceRequest`` into :class:`ReceivedPoint` s."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    out: list[ReceivedPoint] = []
    for rm in request.resource_metrics:
        service = str(_attrs(rm.resource.attributes).get("service.name", ""))
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                which = m.WhichOneof("data")
                for p in getattr(m, which).data_points if which else ():
                    if which == "histogram":
                        number = float(p.count)
                    else:
                        number = float(getattr(p, p.WhichOneof("value") or "as_double"))
                    out.append(ReceivedPoint(m.name, _attrs(p.attributes), number, service))
    return out


class OtlpHttpReceiver:
    """A minimal OTLP/HTTP receiver on ``127.0.0.1`` for end-to-end tests.

    Accepts ``POST /v1/traces`` and ``POST /v1/metrics`` with a protobuf body
    (plain, gzip or deflate), answers with an empty export response and keeps
    the decoded spans, metric points and request headers. Use as a context
    manager::

        with OtlpHttpReceiver() as rx:
            configure_otlp(endpoint=rx.endpoint, ...)
            ...
            spans = rx.wait_for(lambda s: len(s) >= 3)
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._points: list[ReceivedPoint] = []
        self.headers: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:43817`` (``/v1/traces`` is the path)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._lock:
            return list(self._spans)

    def points(self) -> list[ReceivedPoint]:
        """Every metric point received so far, in arrival order (each export
        repeats the cumulative values: the last point of a series is current)."""
        with self._lock:
            return list(self._points)

    def wait_for_points(
        self, done: Callable[[list[ReceivedPoint]], bool], timeout: float = 10.0
    ) -> list[ReceivedPoint]:
        """Block until ``done(points)`` holds; return the points.

        Raises:
            TimeoutError: ``done`` still false after ``timeout`` seconds.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: done(list(self._points)), timeout):
                raise TimeoutError(
                    f"OTLP receiver: condition not met; got {len(self._points)} metric points"
                )
            return list(self._points)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0
    ) -> list[ReceivedSpan]:
        """Block until ``done(spans)`` holds; return the spans.

        Raises:
            TimeoutError: ``done`` still false after ``timeout`` seconds.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: done(list(self._spans)), timeout):
                raise TimeoutError(
                    f"OTLP receiver: condition not met; got {len(self._spans)} spans"
                )
            return list(self._spans)

    def _record(self, headers: dict[str, str], body: bytes) -> None:
        spans = decode_export_request(body)
        with self._lock:
            self.headers.append(headers)
            self._spans.extend(spans)
            self._lock.notify_all()

    def _record_metrics(self, body: bytes) -> None:
        points = decode_metrics_request(body)
        with self._lock:
            self._points.extend(points)
            self._lock.notify_all()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
                    ExportMetricsServiceResponse,
                )
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceResponse,
                )

                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path == "/v1/metrics":
                    receiver._record_metrics(body)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                elif self.path == "/v1/traces":
                    receiver._record({k.lower(): v for k, v in self.headers.items()}, body)
                    reply = ExportTraceServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
