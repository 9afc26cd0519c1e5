"""Metric export in a fresh interpreter each (the global MeterProvider is set
once per process): the Prometheus endpoint, the ASGI and WSGI apps serve the
same exposition, and a second configuration or the application's own
provider is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_endpoint_and_the_asgi_and_wsgi_apps_serve_the_same_counters() -> None:
    out = run(
        """
        import asyncio, urllib.request
        from azync_flow import _metrics
        from azync_flow.telemetry.metrics import (
            installed, prometheus_asgi_app, prometheus_wsgi_app, start_prometheus_server,
        )

        _metrics.workflow_started("order")
        _metrics.workflow_started("order")
        server = start_prometheus_server(0)
        assert server.url.startswith("http://127.0.0.1:")
        over_http = urllib.request.urlopen(server.url).read().decode()
        server.close()

        async def asgi():
            sent = []
            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}
            async def send(message):
                sent.append(message)
            scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": [],
                     "query_string": b"", "http_version": "1.1"}
            await prometheus_asgi_app()(scope, receive, send)
            assert sent[0]["status"] == 200
            return b"".join(m.get("body", b"") for m in sent[1:]).decode()

        statuses = []
        wsgi = b"".join(prometheus_wsgi_app()(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
            lambda status, headers: statuses.append(status),
        )).decode()
        assert statuses == ["200 OK"]
        line = 'azync_flow_workflow_started_total{azync_workflow_name="order"'
        for text in (over_http, asyncio.run(asgi()), wsgi):
            [sample] = [x for x in text.splitlines() if x.startswith(line)]
            print(sample.rsplit(" ", 1)[1])
        print(installed().exporters)
        """
    )
    assert out.split() == ["2.0", "2.0", "2.0", "('prometheus',)"]


def test_metrics_are_configured_once_and_never_over_the_applications_provider() -> None:
    out = run(
        """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from azync_flow.errors import OtlpConfigError
        from azync_flow.telemetry import metrics as export

        try:
            export.configure_metrics(["statsd"])
        except OtlpConfigError as exc:
            print("unknown:", "statsd" in str(exc))
        first = export.configure_metrics(["console"], export_interval=3600)
        print("same:", export.configure_metrics(["console"]) is first)
        try:
            export.start_prometheus_server(0)
        except OtlpConfigError as exc:
            print("no prometheus:", "include 'prometheus'" in str(exc))
        """
    )
    assert out.splitlines() == ["unknown: True", "same: True", "no prometheus: True"]
    out = run(
        """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from azync_flow.errors import OtlpConfigError
        from azync_flow.telemetry.metrics import start_prometheus_server

        metrics.set_meter_provider(MeterProvider())
        try:
            start_prometheus_server(0)
        except OtlpConfigError as exc:
            print("refused:", "already installed" in str(exc))
        """
    )
    assert out.splitlines() == ["refused: True"]
