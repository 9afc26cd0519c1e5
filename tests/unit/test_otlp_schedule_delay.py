"""configure_otlp's batch export delay: 200 ms unless OTEL_BSP_SCHEDULE_DELAY says
otherwise; a bad value is the product's config error (CLI exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from azync_flow.errors import OtlpConfigError
from azync_flow.otlp import DEFAULT_SCHEDULE_DELAY_MS, configure_otlp, schedule_delay_millis
from azync_flow.telemetry import flush_spans
from azync_flow.testing_otel import OtlpHttpReceiver


def test_unset_or_empty_delay_is_200_ms() -> None:
    assert DEFAULT_SCHEDULE_DELAY_MS == 200
    assert schedule_delay_millis({}) == 200
    assert schedule_delay_millis({"OTEL_BSP_SCHEDULE_DELAY": " "}) == 200


def test_a_set_delay_is_honoured() -> None:
    assert schedule_delay_millis({"OTEL_BSP_SCHEDULE_DELAY": "1500"}) == 1500


@pytest.mark.parametrize("raw", ["soon", "0", "-5", "1.5"])
def test_a_bad_delay_is_refused(raw: str) -> None:
    with pytest.raises(OtlpConfigError, match=r"OTEL_BSP_SCHEDULE_DELAY=.*milliseconds > 0"):
        schedule_delay_millis({"OTEL_BSP_SCHEDULE_DELAY": raw})


def test_configure_otlp_refuses_a_bad_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "later")
    with pytest.raises(OtlpConfigError, match="later"):
        configure_otlp(endpoint="http://127.0.0.1:9", set_global=False)


def test_spans_leave_within_the_default_delay_without_a_flush(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_BSP_SCHEDULE_DELAY", raising=False)
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp(endpoint=rx.endpoint, set_global=False)
        try:
            provider.get_tracer("t").start_span("ended").end()
            # the SDK's own 5 s default would miss this deadline
            spans = rx.wait_for(lambda s: len(s) == 1, timeout=2.5)
            assert [s.name for s in spans] == ["ended"]
        finally:
            provider.shutdown()


def test_cli_exits_2_on_a_bad_delay() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_BSP_SCHEDULE_DELAY": "soon",
    }
    done = subprocess.run(
        [sys.executable, "-m", "azync_flow.cli", "--help"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "OTEL_BSP_SCHEDULE_DELAY='soon'" in done.stderr


def test_flush_spans_without_an_sdk_provider_is_a_no_op() -> None:
    from opentelemetry.trace import NoOpTracerProvider

    assert flush_spans(NoOpTracerProvider()) is True


@pytest.mark.parametrize("timeout", [-1.0, float("nan")])
def test_flush_spans_refuses_a_bad_timeout(timeout: float) -> None:
    with pytest.raises(OtlpConfigError, match="timeout"):
        flush_spans(timeout=timeout)
