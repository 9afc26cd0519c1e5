"""In-memory span capture for tests of traced code (needs ``opentelemetry-sdk``).

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

from collections.abc import Iterable, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["SpanCapture", "parent_id", "span_ids", "trace_ids"]


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
