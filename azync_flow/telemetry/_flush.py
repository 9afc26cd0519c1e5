"""Sending buffered spans now: at a worker's graceful stop, or on demand."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from azync_flow.errors import OtlpConfigError

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from azync_flow.worker import Worker

__all__ = ["flush_spans", "flush_spans_on_stop"]


def flush_spans(tracer_provider: TracerProvider | None = None, *, timeout: float = 10.0) -> bool:
    """Export the spans ``tracer_provider`` still buffers (its span processors'
    ``force_flush``), blocking until they were handed to the exporters.

    Args:
        tracer_provider: an SDK provider; None means the global one. A
            provider without ``force_flush`` (the API's proxy or no-op
            provider: no tracing configured) has nothing to send.
        timeout: seconds to wait at most (>= 0).

    Returns:
        True when everything was flushed (or there was nothing to flush),
        False when ``timeout`` ran out first.

    Raises:
        OtlpConfigError: ``timeout`` is negative or not a number.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise OtlpConfigError(f"flush_spans: timeout must be seconds >= 0, not {timeout!r}")
    provider: Any = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is None:
        return True
    millis = int(timeout * 1000) if math.isfinite(timeout) else 2**31 - 1
    return bool(force_flush(millis))


def flush_spans_on_stop(worker: Worker, tracer_provider: TracerProvider | None = None) -> None:
    """Have ``worker`` flush the spans of ``tracer_provider`` (None: the global
    provider, looked up at stop time) when it stops gracefully, after its
    in-flight jobs ended. Once per provider and worker, however often called.
    """
    key = "global" if tracer_provider is None else f"{id(tracer_provider):x}"

    async def flush() -> None:
        await asyncio.to_thread(flush_spans, tracer_provider)

    worker.add_stop_hook(f"telemetry.flush_spans.{key}", flush)
