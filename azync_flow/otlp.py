"""One-call span export (opt-in; needs the ``otlp`` extra): OTLP to a collector,
or one line per span on the console when there is no collector at hand.

``pip install 'azync-flow[otlp]'``, then at application start::

    from azync_flow.otlp import configure_console, configure_otlp

    provider = configure_otlp(service_name="orders-worker")  # OTLP/HTTP to localhost:4318
    provider = configure_console()  # or: print every span to stderr (no Docker needed)

:func:`export_tally` says how many spans were really delivered and how many the
exporter failed to deliver (``force_flush`` alone only says the queue was drained).

Nothing in azync_flow calls this for you: an application that already
configures OpenTelemetry (its own provider, the ``opentelemetry-instrument``
agent, a vendor distro) does not need it, and azync_flow's spans follow that
configuration.

Standard environment variables are honoured, with explicit arguments taking
precedence: ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL``, ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``,
``OTEL_EXPORTER_OTLP_(TRACES_)HEADERS``, ``..._COMPRESSION``, ``..._TIMEOUT``,
``..._INSECURE`` (gRPC), ``OTEL_BSP_*`` (batching) and ``OTEL_SDK_DISABLED``.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Literal
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from azync_flow.errors import OtlpConfigError
from azync_flow.telemetry.metrics import DEFAULT_SERVICE_NAME, service_resource

__all__ = [
    "DEFAULT_SCHEDULE_DELAY_MS",
    "DEFAULT_SERVICE_NAME",
    "ExportTally",
    "Protocol",
    "configure_console",
    "configure_from_env",
    "configure_otlp",
    "env_exporters",
    "export_tally",
    "schedule_delay_millis",
    "service_resource",
]

Protocol = Literal["http/protobuf", "grpc"]

_PROTOCOLS: tuple[str, ...] = ("http/protobuf", "grpc")


def _protocol(protocol: str | None) -> str:
    chosen = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if chosen not in _PROTOCOLS:
        raise OtlpConfigError(f"unsupported OTLP protocol {chosen!r}; use one of {_PROTOCOLS}")
    return chosen


#: The batch export delay :func:`configure_otlp` uses when ``OTEL_BSP_SCHEDULE_DELAY``
#: is unset: a span leaves the process at most this long (plus one export) after it
#: ended, so a killed worker loses only what ended in that window. The SDK's own
#: default, 5000 ms, would lose five seconds of spans.
DEFAULT_SCHEDULE_DELAY_MS = 200


def schedule_delay_millis(environ: Mapping[str, str] | None = None) -> int:
    """The batch span processor's export delay: ``OTEL_BSP_SCHEDULE_DELAY``
    (whole milliseconds, > 0) or, unset or empty, :data:`DEFAULT_SCHEDULE_DELAY_MS`.

    Args:
        environ: the variables to read (default ``os.environ``).

    Returns:
        The delay in milliseconds.

    Raises:
        OtlpConfigError: the variable is not a positive whole number of milliseconds.
    """
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_BSP_SCHEDULE_DELAY", "").strip()
    if not raw:
        return DEFAULT_SCHEDULE_DELAY_MS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise OtlpConfigError(
            f"OTEL_BSP_SCHEDULE_DELAY={raw!r}: expected a whole number of milliseconds > 0"
        )
    return value


def _http_traces_url(endpoint: str) -> str:
    """Append the OTLP traces path to a base URL (``http://host:4318``)."""
    if urlsplit(endpoint).path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def _exporter(
    protocol: str, endpoint: str | None, headers: Mapping[str, str] | None
) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint, headers=dict(headers) if headers else None)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    url = _http_traces_url(endpoint) if endpoint else None
    return HttpExporter(endpoint=url, headers=headers)


def configure_otlp(
    service_name: str | None = None,
    protocol: Protocol | None = None,
    endpoint: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool = True,
) -> TracerProvider:
    """Send spans to an OTLP collector (Jaeger, an OpenTelemetry Collector, ...).

    Builds an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` feeding the
    OTLP exporter and, by default, makes it the global provider. The
    processor exports every ``OTEL_BSP_SCHEDULE_DELAY`` ms, 200 ms unless set
    (:func:`schedule_delay_millis`; the SDK's default is 5000 ms). Spans are
    also flushed when a worker with tracing stops gracefully and at
    interpreter exit (the provider's atexit shutdown); call
    :func:`azync_flow.telemetry.flush_spans` to send them earlier.

    Args:
        service_name: ``service.name`` shown in Jaeger. Defaults to
            ``OTEL_SERVICE_NAME`` (or a ``service.name`` in
            ``OTEL_RESOURCE_ATTRIBUTES``), else ``"azync-flow"``.
        protocol: ``"http/protobuf"`` (port 4318) or ``"grpc"`` (port 4317).
            Defaults to ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` /
            ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``"http/protobuf"``.
        endpoint: Collector URL. For HTTP a base URL (``http://host:4318``) gets
            ``/v1/traces`` appended; a URL with a path is used as is. For gRPC,
            ``http://host:4317`` (plain text) or ``https://...``. Defaults to
            the ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` variables, else localhost.
        headers: Extra request headers (authentication); defaults to
            ``OTEL_EXPORTER_OTLP_(TRACES_)HEADERS``.
        tracer_provider: Add the exporter to this SDK provider instead of
            creating one (``set_global`` is then ignored).
        set_global: Install the new provider as the global one (what
            azync_flow and other instrumentations use by default).

    Returns:
        The provider the exporter was added to.

    Raises:
        OtlpConfigError: Unknown protocol, a bad ``OTEL_BSP_SCHEDULE_DELAY``,
            or ``set_global`` while the
            application already installed a global provider (pass it as
            ``tracer_provider`` instead).
    """
    chosen = _protocol(protocol)
    delay = schedule_delay_millis()
    return _install(
        lambda tally: BatchSpanProcessor(
            _Tallying(_exporter(chosen, endpoint, headers), tally), schedule_delay_millis=delay
        ),
        service_name,
        tracer_provider,
        set_global,
    )


def configure_console(
    service_name: str | None = None,
    *,
    out: IO[str] | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool = True,
) -> TracerProvider:
    """Print every span as it ends, one line each, to ``out`` (default stderr):
    tracing without a collector or Docker. Arguments and errors as
    :func:`configure_otlp`.

    A line reads ``span <name>  <ms> ms  trace=<8 hex>  <azync.* attributes>``,
    for example ``span activity charge  12.3 ms  trace=4bf92f35  azync.attempt=1
    azync.outcome=succeeded azync.run_id=...``.
    """
    console = ConsoleSpanExporter(out=out or sys.stderr, formatter=_line)
    return _install(
        lambda tally: SimpleSpanProcessor(_Tallying(console, tally)),
        service_name,
        tracer_provider,
        set_global,
    )


@dataclass(slots=True)
class ExportTally:
    """What the exporters of one provider did so far.

    Attributes:
        exported: spans the exporter delivered.
        failed: spans it failed to deliver (collector down, refused, ...).
        last_error: the exporter's last failure, ``""`` if none.
    """

    exported: int = 0
    failed: int = 0
    last_error: str = ""

    @property
    def ok(self) -> bool:
        """True when spans were delivered and none failed."""
        return self.exported > 0 and self.failed == 0


_TALLIES: weakref.WeakKeyDictionary[TracerProvider, ExportTally] = weakref.WeakKeyDictionary()
_TALLY_LOCK = threading.Lock()


def export_tally(provider: TracerProvider) -> ExportTally:
    """The delivery count of the exporters :func:`configure_otlp` /
    :func:`configure_console` added to ``provider`` (call ``force_flush`` first).

    Returns:
        A live :class:`ExportTally` (all zero if nothing was configured on it).
    """
    with _TALLY_LOCK:
        return _TALLIES.setdefault(provider, ExportTally())


class _Tallying(SpanExporter):
    """Delegates to ``inner`` and counts delivered and failed spans."""

    def __init__(self, inner: SpanExporter, tally: ExportTally) -> None:
        self.inner = inner
        self.tally = tally

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:
            result = SpanExportResult.FAILURE
            self.tally.last_error = f"{type(exc).__name__}: {exc}"
        with _TALLY_LOCK:
            if result is SpanExportResult.SUCCESS:
                self.tally.exported += len(spans)
            else:
                self.tally.failed += len(spans)
                self.tally.last_error = self.tally.last_error or "the exporter reported a failure"
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _line(span: ReadableSpan) -> str:
    ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    trace_id = f"{span.context.trace_id:032x}"[:8] if span.context else "-"
    attrs = " ".join(
        f"{k}={v!s}" for k, v in sorted((span.attributes or {}).items()) if k.startswith("azync.")
    )
    return f"span {span.name}  {ms:.1f} ms  trace={trace_id}  {attrs}".rstrip() + "\n"


def _install(
    processor: Callable[[ExportTally], SpanProcessor],
    service_name: str | None,
    tracer_provider: TracerProvider | None,
    set_global: bool,
) -> TracerProvider:
    if tracer_provider is None and set_global:
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider):
            raise OtlpConfigError(
                f"a global TracerProvider is already installed ({type(current).__name__}); "
                "pass it as tracer_provider= to add the exporter to it"
            )
    provider = tracer_provider or TracerProvider(resource=service_resource(service_name))
    provider.add_span_processor(processor(export_tally(provider)))
    if tracer_provider is None and set_global:
        trace.set_tracer_provider(provider)
    return provider


_TRACES_EXPORTERS = ("otlp", "console", "none")
_METRICS_EXPORTERS = ("otlp", "prometheus", "console", "none")


def _listed(name: str, allowed: tuple[str, ...], environ: Mapping[str, str]) -> list[str] | None:
    """The comma list of ``name`` (None when unset or empty)."""
    value = environ.get(name, "").strip().lower()
    if not value:
        return None
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    for v in chosen:
        if v not in allowed:
            raise OtlpConfigError(f"{name}={v!r} is not supported here; use one of {allowed}")
    return [v for v in chosen if v != "none"]


def _endpoint_set(signal: str, environ: Mapping[str, str]) -> bool:
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
    )


def env_exporters(environ: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The trace and metric exporters the ``OTEL_*`` variables ask for.

    ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``) and
    ``OTEL_METRICS_EXPORTER`` (``otlp``, ``prometheus``, ``console``,
    ``none``), comma-separated. Unset, a signal is exported with OTLP when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the signal's own endpoint variable)
    is set, else not at all. ``OTEL_SDK_DISABLED=true`` turns both off.

    Returns:
        ``(trace exporters, metric exporters)``, each possibly empty.

    Raises:
        OtlpConfigError: an exporter name this package cannot provide.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return [], []
    traces = _listed("OTEL_TRACES_EXPORTER", _TRACES_EXPORTERS, env)
    if traces is None:
        traces = ["otlp"] if _endpoint_set("TRACES", env) else []
    metrics = _listed("OTEL_METRICS_EXPORTER", _METRICS_EXPORTERS, env)
    if metrics is None:
        metrics = ["otlp"] if _endpoint_set("METRICS", env) else []
    return traces, metrics


def configure_from_env(
    *, metrics: bool = False, extra_metrics: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Turn tracing (and metrics) on from the standard ``OTEL_*`` variables, with no code.

    What ``azync-flow worker`` and every other CLI command call at start (see
    :func:`env_exporters` for the variables). Traces: an OTLP exporter as
    :func:`configure_otlp` builds it (``OTEL_EXPORTER_OTLP_*``,
    ``OTEL_SERVICE_NAME`` ...), or one line per span on stderr for
    ``console``. Metrics (only with ``metrics=True``): the exporters of
    ``OTEL_METRICS_EXPORTER`` plus ``extra_metrics``; ``prometheus`` from the
    variables also starts the endpoint on ``OTEL_EXPORTER_PROMETHEUS_HOST``
    (default ``127.0.0.1``) and ``OTEL_EXPORTER_PROMETHEUS_PORT`` (9464).

    A tracer provider the application already installed is left as it is, and
    so is a meter provider.

    Args:
        metrics: configure metric export too (long-running processes).
        extra_metrics: exporters asked for otherwise (``--metrics-port``: prometheus).

    Returns:
        ``(trace exporters, metric exporters)`` configured.

    Raises:
        OtlpConfigError: an unsupported exporter or protocol.
    """
    traces, wanted = env_exporters()
    done_traces: list[str] = []
    if traces and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        provider = TracerProvider(resource=service_resource(None))
        if "otlp" in traces:
            configure_otlp(tracer_provider=provider)
        if "console" in traces:
            configure_console(tracer_provider=provider)
        trace.set_tracer_provider(provider)
        done_traces = traces
    done_metrics: list[str] = []
    chosen = list(dict.fromkeys([*wanted, *extra_metrics])) if metrics else []
    if chosen:
        from azync_flow.telemetry.metrics import configure_metrics, installed

        if installed() is None:
            configure_metrics(chosen)
            done_metrics = chosen
        if "prometheus" in wanted:
            from azync_flow.telemetry.metrics import start_prometheus_server

            start_prometheus_server(
                int(os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", "9464")),
                os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1"),
            )
    return done_traces, done_metrics
