"""Metric export: a Prometheus endpoint, OTLP or the console (opt-in).

azync_flow records its metrics (docs/metrics.md; the list is
``azync_flow._metrics.CATALOGUE``) on the global OpenTelemetry
``MeterProvider``. This module installs one with the readers you ask for; it
needs the OpenTelemetry SDK (``pip install 'azync-flow[metrics]'`` for
Prometheus, ``[otlp]`` for OTLP), imported only when a function here is called.

``azync-flow worker --metrics-port 9464`` does it for you; in your own process::

    from azync_flow.telemetry.metrics import start_prometheus_server

    server = start_prometheus_server(9464)          # http://127.0.0.1:9464/metrics

An ASGI application (a web console, your own app) mounts
:func:`prometheus_asgi_app` instead of opening a port; a WSGI one
:func:`prometheus_wsgi_app`. Both serve the same exposition as the server.

One provider per process: the first call decides the readers (a Prometheus
reader, OTLP, console). A later :func:`start_prometheus_server` or
``prometheus_*_app`` on a provider this module installed with Prometheus only
adds a server or an app; on a provider without it, or on one the application
installed itself, it raises :class:`~azync_flow.errors.OtlpConfigError`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from azync_flow.errors import OtlpConfigError

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "MetricsConfig",
    "PrometheusServer",
    "configure_metrics",
    "installed",
    "prometheus_asgi_app",
    "prometheus_wsgi_app",
    "service_resource",
    "start_prometheus_server",
]

log = logging.getLogger("azync_flow.telemetry")

_EXPORTERS = ("otlp", "prometheus", "console")

#: ``service.name`` of azync_flow's telemetry when neither an argument nor
#: ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` names one.
DEFAULT_SERVICE_NAME = "azync-flow"


def service_resource(service_name: str | None = None) -> Any:
    """The SDK ``Resource`` of this process's spans and metrics:
    ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``, an explicit
    ``service_name`` winning, else :data:`DEFAULT_SERVICE_NAME` (needs the SDK)."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME and
    # falls back to "unknown_service:<exe>"; an explicit service_name wins.
    detected = Resource.create()
    if service_name is None:
        if not str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            return detected
        service_name = DEFAULT_SERVICE_NAME
    return detected.merge(Resource({SERVICE_NAME: service_name}))


@dataclass
class MetricsConfig:
    """What :func:`configure_metrics` installed in this process.

    Attributes:
        provider: the SDK ``MeterProvider`` (the global one).
        exporters: the readers it has: ``prometheus``, ``otlp``, ``console``.
        servers: Prometheus endpoints started so far.
    """

    provider: Any
    exporters: tuple[str, ...]
    servers: list[PrometheusServer] = field(default_factory=list)


@dataclass
class PrometheusServer:
    """A Prometheus endpoint serving ``/metrics`` (any path answers) from a thread.

    Attributes:
        host: the address it listens on.
        port: the port it listens on (the one chosen when asked for 0).
    """

    host: str
    port: int
    _server: Any = None
    _thread: Any = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (the metrics stay recorded)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


_lock = threading.Lock()
_installed: MetricsConfig | None = None


def installed() -> MetricsConfig | None:
    """What :func:`configure_metrics` installed in this process, if anything."""
    return _installed


def configure_metrics(
    exporters: Sequence[str] = ("prometheus",),
    *,
    service_name: str | None = None,
    export_interval: float | None = None,
) -> MetricsConfig:
    """Install the global SDK ``MeterProvider`` with these readers (once per process).

    Args:
        exporters: any of ``prometheus`` (a reader that
            :func:`start_prometheus_server` and the apps serve), ``otlp``
            (pushed to ``OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT`` with the
            ``OTEL_EXPORTER_OTLP_*`` settings, HTTP or gRPC per
            ``OTEL_EXPORTER_OTLP_(METRICS_)PROTOCOL``), ``console`` (stdout).
        service_name: ``service.name`` (default as for traces:
            ``OTEL_SERVICE_NAME``, else ``azync-flow``).
        export_interval: seconds between OTLP/console pushes (default
            ``OTEL_METRIC_EXPORT_INTERVAL`` in ms, else 60 s).

    Returns:
        The configuration; the same one when called again with the same
        exporters.

    Raises:
        OtlpConfigError: an unknown exporter; metrics already configured with
            other exporters; the application installed its own
            ``MeterProvider``; or the package an exporter needs is missing.
    """
    global _installed
    wanted = tuple(dict.fromkeys(exporters))
    unknown = [e for e in wanted if e not in _EXPORTERS]
    if unknown:
        raise OtlpConfigError(f"unknown metrics exporter {unknown[0]!r}; use one of {_EXPORTERS}")
    with _lock:
        if _installed is not None:
            if set(wanted) <= set(_installed.exporters):
                return _installed
            raise OtlpConfigError(
                f"metrics are already exported with {_installed.exporters}; "
                "choose every exporter in one configure_metrics call"
            )
        try:
            from opentelemetry import metrics
            from opentelemetry.sdk.metrics import MeterProvider
        except ImportError as exc:
            raise OtlpConfigError(
                "metrics export needs the OpenTelemetry SDK: pip install 'azync-flow[metrics]'"
            ) from exc
        current = metrics.get_meter_provider()
        if type(current).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider"):
            raise OtlpConfigError(
                f"a global MeterProvider is already installed ({type(current).__name__}); "
                "azync_flow's metrics go to it: configure its exporters there"
            )
        readers = [_reader(e, export_interval) for e in wanted]
        provider = MeterProvider(metric_readers=readers, resource=service_resource(service_name))
        metrics.set_meter_provider(provider)
        _installed = MetricsConfig(provider, wanted)
        return _installed


def _reader(exporter: str, interval: float | None) -> Any:
    if exporter == "prometheus":
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
        except ImportError as exc:
            raise OtlpConfigError(
                "the Prometheus endpoint needs opentelemetry-exporter-prometheus: "
                "pip install 'azync-flow[metrics]'"
            ) from exc
        return PrometheusMetricReader()
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    millis = None if interval is None else interval * 1000
    if exporter == "console":
        return PeriodicExportingMetricReader(ConsoleMetricExporter(), millis)
    return PeriodicExportingMetricReader(_otlp_exporter(), millis)


def _otlp_exporter() -> Any:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as Grpc,
            )

            return Grpc()
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as Http,
        )
    except ImportError as exc:
        raise OtlpConfigError("OTLP export needs: pip install 'azync-flow[otlp]'") from exc
    if protocol != "http/protobuf":
        raise OtlpConfigError(f"unsupported OTLP protocol {protocol!r}; use http/protobuf or grpc")
    return Http()


def _with_prometheus() -> MetricsConfig:
    config = _installed or configure_metrics(("prometheus",))
    if "prometheus" not in config.exporters:
        raise OtlpConfigError(
            f"metrics are exported with {config.exporters} only; include 'prometheus' "
            "in the first configure_metrics call to serve them"
        )
    return config


def start_prometheus_server(port: int, host: str = "127.0.0.1") -> PrometheusServer:
    """Serve the Prometheus exposition of this process's metrics on ``host:port``.

    Installs the Prometheus reader first if no metrics are configured yet. The
    server runs in a daemon thread (prometheus_client's), answers
    ``GET /metrics``, and includes prometheus_client's process and platform
    collectors.

    Args:
        port: TCP port; 0 picks a free one (see the returned ``port``).
        host: address to bind; ``127.0.0.1`` keeps it on this machine
            (``0.0.0.0`` for a scraper elsewhere).

    Returns:
        The running server (``url``, ``port``, ``close()``).

    Raises:
        OtlpConfigError: metrics are configured without Prometheus, or by the
            application (see the module doc); a missing package.
        OSError: the address cannot be bound (in use, no permission).
    """
    config = _with_prometheus()
    from prometheus_client import REGISTRY, start_http_server

    httpd, thread = start_http_server(port, addr=host, registry=REGISTRY)
    server = PrometheusServer(host, int(httpd.server_address[1]), httpd, thread)
    config.servers.append(server)
    log.info("serving metrics on %s", server.url)
    return server


def prometheus_asgi_app() -> Callable[..., Any]:
    """An ASGI application answering with the Prometheus exposition (mount it at
    ``/metrics``). Installs the Prometheus reader as :func:`start_prometheus_server`.

    Raises:
        OtlpConfigError: as :func:`start_prometheus_server`.
    """
    _with_prometheus()
    from prometheus_client import REGISTRY, make_asgi_app

    app: Callable[..., Any] = make_asgi_app(REGISTRY)
    return app


def prometheus_wsgi_app() -> Callable[..., Any]:
    """A WSGI application answering with the Prometheus exposition (mount it at
    ``/metrics``). Installs the Prometheus reader as :func:`start_prometheus_server`.

    Raises:
        OtlpConfigError: as :func:`start_prometheus_server`.
    """
    _with_prometheus()
    from prometheus_client import REGISTRY, make_wsgi_app

    app: Callable[..., Any] = make_wsgi_app(REGISTRY)
    return app
