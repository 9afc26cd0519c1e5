"""Tracing and metrics of CLI processes from the standard `OTEL_*` variables.

Every command turns tracing on when `OTEL_TRACES_EXPORTER` or an
`OTEL_EXPORTER_OTLP_*ENDPOINT` is set (docs/tracing.md); `worker` also
exports metrics (`OTEL_METRICS_EXPORTER`, `--metrics-port`; docs/metrics.md).
Nothing is imported from the OpenTelemetry SDK when none of them is set.
"""

from __future__ import annotations

import os
from typing import Any

from azync_flow.errors import OtlpConfigError

from ._common import CliError

__all__ = ["serve_metrics", "telemetry_from_env"]

#: Variables that ask for export; without any of them the SDK is never imported.
_ASKING = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


def telemetry_from_env(*, metrics: bool = False, prometheus: bool = False) -> None:
    """Configure export as the environment asks (see `azync_flow.otlp.configure_from_env`).

    Args:
        metrics: export metrics too (the worker).
        prometheus: a Prometheus reader is needed whatever the variables say
            (`--metrics-port`).

    Raises:
        CliError: an unsupported exporter or protocol, or the extra it needs
            is not installed (the message names it).
    """
    if not prometheus and not any(os.environ.get(name) for name in _ASKING):
        return
    try:
        from azync_flow.otlp import configure_from_env
    except ImportError:
        raise CliError(
            "the OTEL_* variables ask for telemetry export, which needs the OpenTelemetry "
            "SDK: pip install 'azync-flow[otlp]' (traces, OTLP) or 'azync-flow[metrics]' "
            "(Prometheus)"
        ) from None
    try:
        configure_from_env(metrics=metrics, extra_metrics=("prometheus",) if prometheus else ())
    except (OtlpConfigError, ImportError) as exc:
        raise CliError(f"telemetry export: {exc}") from None


def serve_metrics(port: int, host: str) -> Any:
    """Start the Prometheus endpoint of `worker --metrics-port` (after
    :func:`telemetry_from_env` installed the reader).

    Returns:
        The server (`azync_flow.telemetry.metrics.PrometheusServer`).

    Raises:
        CliError: the address cannot be bound, or metrics cannot be served.
    """
    from azync_flow.telemetry.metrics import start_prometheus_server

    try:
        return start_prometheus_server(port, host)
    except OtlpConfigError as exc:
        raise CliError(f"--metrics-port: {exc}") from None
    except OSError as exc:
        raise CliError(f"--metrics-port: cannot serve on {host}:{port}: {exc}") from None
