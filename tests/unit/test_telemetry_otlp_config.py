"""configure_otlp: defaults, precedence and refusals."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from azync_flow.errors import OtlpConfigError
from azync_flow.otlp import configure_otlp, env_exporters
from azync_flow.telemetry import RunKind, RunTracer
from azync_flow.testing_otel import OtlpHttpReceiver


@pytest.fixture
def clean_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("OTEL_"):
            monkeypatch.delenv(key)


@pytest.mark.usefixtures("clean_otel_env")
def test_service_name_defaults_to_azync_flow() -> None:
    provider = configure_otlp(endpoint="http://127.0.0.1:9", set_global=False)
    try:
        assert provider.resource.attributes["service.name"] == "azync-flow"
    finally:
        provider.shutdown()


def test_explicit_service_name_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    provider = configure_otlp("explicit", endpoint="http://127.0.0.1:9", set_global=False)
    try:
        assert provider.resource.attributes["service.name"] == "explicit"
        assert provider.resource.attributes["deployment.environment"] == "staging"
    finally:
        provider.shutdown()


def test_unknown_protocol_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        OtlpConfigError, match=r"\[otlp_config\] unsupported OTLP protocol 'http/json'"
    ):
        configure_otlp(protocol="http/json", set_global=False)  # type: ignore[arg-type]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
    with pytest.raises(OtlpConfigError, match="'thrift'"):
        configure_otlp(set_global=False)


@pytest.mark.usefixtures("clean_otel_env")
def test_full_traces_url_is_used_as_given() -> None:
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp(endpoint=rx.endpoint + "/v1/traces", set_global=False)
        try:
            tracer = RunTracer(provider)
            carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", "r1")
            started = datetime.now(UTC)
            tracer.end_run_span(
                RunKind.WORKFLOW, "order", "r1", carrier=carrier, started_at=started, state="failed"
            )
            assert provider.force_flush(10_000)
            [span] = rx.wait_for(lambda s: len(s) >= 1)
        finally:
            provider.shutdown()
    assert span.name == "workflow order"


def test_refuses_to_replace_an_applications_global_provider() -> None:
    code = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from azync_flow.errors import OtlpConfigError
        from azync_flow.otlp import configure_otlp
        mine = TracerProvider()
        trace.set_tracer_provider(mine)
        try:
            configure_otlp(endpoint="http://127.0.0.1:9")
        except OtlpConfigError as exc:
            print("refused:", "tracer_provider=" in str(exc))
        added = configure_otlp(endpoint="http://127.0.0.1:9", tracer_provider=mine)
        print("added to app provider:", added is mine, trace.get_tracer_provider() is mine)

        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["refused: True", "added to app provider: True True"]


def test_configure_otlp_installs_the_global_provider_it_returns() -> None:
    code = textwrap.dedent(
        """
        from opentelemetry import trace
        from azync_flow.otlp import configure_otlp
        p = configure_otlp(service_name="svc", endpoint="http://127.0.0.1:9")
        print(trace.get_tracer_provider() is p, p.resource.attributes["service.name"])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "svc"]


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, [], []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ["otlp"], ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"], []),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, [], ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"], []),
        ({"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_METRICS_EXPORTER": "prometheus"},
         ["otlp", "console"], ["prometheus"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none",
          "OTEL_METRICS_EXPORTER": "none"}, [], []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, [], []),
    ],
)  # fmt: skip
def test_the_otel_variables_choose_the_exporters(
    env: dict[str, str], traces: list[str], metrics: list[str]
) -> None:
    assert env_exporters(env) == (traces, metrics)


def test_an_exporter_this_package_cannot_provide_is_refused() -> None:
    with pytest.raises(OtlpConfigError, match="OTEL_METRICS_EXPORTER='statsd'"):
        env_exporters({"OTEL_METRICS_EXPORTER": "statsd"})
