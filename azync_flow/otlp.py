"""One-call OTLP export of spans (opt-in; needs the ``otlp`` extra).

``pip install 'azync-flow[otlp]'``, then at application start::

    from azync_flow.otlp import configure_otlp

    provider = configure_otlp(service_name="orders-worker")  # OTLP/HTTP to localhost:4318

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
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from azync_flow.store.errors import AzyncError

__all__ = ["DEFAULT_SERVICE_NAME", "OtlpConfigError", "Protocol", "configure_otlp"]

Protocol = Literal["http/protobuf", "grpc"]

DEFAULT_SERVICE_NAME = "azync-flow"
_PROTOCOLS: tuple[str, ...] = ("http/protobuf", "grpc")


class OtlpConfigError(AzyncError):
    """``configure_otlp`` cannot do what was asked (bad protocol, provider already set)."""

    code = "otlp_config"


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


def _resource(service_name: str | None) -> Resource:
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME and
    # falls back to "unknown_service:<exe>"; an explicit service_name wins.
    detected = Resource.create()
    if service_name is None:
        if not str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            return detected
        service_name = DEFAULT_SERVICE_NAME
    return detected.merge(Resource({SERVICE_NAME: service_name}))


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
    OTLP exporter and, by default, makes it the global provider. Spans are
    flushed at interpreter exit (the provider's atexit shutdown); call
    ``provider.force_flush()`` to send them earlier.

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
        OtlpConfigError: Unknown protocol, or ``set_global`` while the
            application already installed a global provider (pass it as
            ``tracer_provider`` instead).
    """
    chosen = _protocol(protocol)
    if tracer_provider is None and set_global:
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider):
            raise OtlpConfigError(
                f"a global TracerProvider is already installed ({type(current).__name__}); "
                "pass it as tracer_provider= to add the OTLP exporter to it"
            )
    provider = tracer_provider or TracerProvider(resource=_resource(service_name))
    provider.add_span_processor(BatchSpanProcessor(_exporter(chosen, endpoint, headers)))
    if tracer_provider is None and set_global:
        trace.set_tracer_provider(provider)
    return provider
