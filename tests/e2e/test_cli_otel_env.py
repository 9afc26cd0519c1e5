"""The standard ``OTEL_*`` variables turn tracing (and the worker's metrics) on
for ``azync-flow`` commands with no code: a run started by the CLI and run by
``azync-flow worker`` lands in one trace at a local OTLP receiver, with its
run span, whether or not the starting process traced."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.telemetry import run_span_id, run_trace_id
from azync_flow.testing_otel import OtlpHttpReceiver, ReceivedSpan, nesting_violations

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "azync_flow.cli"]


@pytest.fixture
def base_env(pg_dsn: str, store: PostgresStore) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "PYTHONPATH": str(ROOT), "AZYNC_DSN": pg_dsn, "AZYNC_SCHEMA": store.schema}


def otel(endpoint: str, service: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
    }


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = await asyncio.to_thread(
        subprocess.run, [*CLI, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


async def run_order(start_env: dict[str, str], worker_env: dict[str, str]) -> str:
    """Start ``m_order`` with the CLI, run it with ``azync-flow worker``; its id."""
    started = await cli(start_env, "workflows", "start", "m_order", "--input", "2", "--json")
    run_id = str(json.loads(started.stdout)["id"])
    worker = await asyncio.create_subprocess_exec(
        *CLI, "worker", "tests.e2e._metrics_app:make_worker", "--log-level", "WARNING",
        cwd=ROOT, env=worker_env,
    )  # fmt: skip
    try:
        done = await cli(start_env, "workflows", "result", run_id, "--timeout", "90", "--json")
        assert json.loads(done.stdout) == 4
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 60) == 0
    return run_id


def of_run(spans: list[ReceivedSpan], run_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.attributes.get("azync.run_id") == run_id]


def has_run_span(run_id: str) -> object:
    def done(spans: list[ReceivedSpan]) -> bool:
        return any(s.name == "workflow m_order" for s in of_run(spans, run_id))

    return done


def check_one_trace(spans: list[ReceivedSpan], run_id: str) -> ReceivedSpan:
    mine = of_run(spans, run_id)
    [run] = [s for s in mine if s.name == "workflow m_order"]
    assert {s.trace_id for s in mine} == {run.trace_id}
    assert run.span_id == run_span_id(run_id)
    assert run.attributes["azync.state"] == "succeeded"
    attempts = [s for s in mine if s is not run and s.parent_span_id is not None]
    assert {s.parent_span_id for s in attempts} == {run.span_id}
    names = sorted(s.name for s in attempts)
    assert names.count("activity m_flaky") == 2  # failed, then succeeded
    assert names.count("activity m_stuck") == 2  # lost (closed by the reaper), then succeeded
    assert "workflow.task m_order" in names
    assert nesting_violations(mine) == []
    return run


async def test_a_run_started_by_a_traced_cli_is_one_trace_with_the_worker_spans(
    base_env: dict[str, str],
) -> None:
    with OtlpHttpReceiver() as rx:
        run_id = await run_order(
            {**base_env, **otel(rx.endpoint, "azync-cli")},
            {**base_env, **otel(rx.endpoint, "azync-worker")},
        )
        spans = await asyncio.to_thread(rx.wait_for, has_run_span(run_id), 60)
        run = check_one_trace(spans, run_id)
        assert run.trace_id != run_trace_id(run_id)  # chosen by the traced CLI at the start
        assert {s.service_name for s in of_run(spans, run_id)} == {"azync-worker"}
        # the worker's metrics went to the same endpoint (OTLP, from the variables)
        points = await asyncio.to_thread(
            rx.wait_for_points,
            lambda ps: any(p.name == "azync_flow.workflow.completed" for p in ps),
            60,
        )
    [completed, *_] = [p for p in reversed(points) if p.name == "azync_flow.workflow.completed"]
    assert completed.attributes == {"azync.workflow.name": "m_order"}
    assert (completed.value, completed.service_name) == (1, "azync-worker")


async def test_a_run_started_without_tracing_gets_a_trace_and_run_span_from_its_run_id(
    base_env: dict[str, str],
) -> None:
    with OtlpHttpReceiver() as rx:
        run_id = await run_order(base_env, {**base_env, **otel(rx.endpoint, "azync-worker")})
        spans = await asyncio.to_thread(rx.wait_for, has_run_span(run_id), 60)
    run = check_one_trace(spans, run_id)
    assert run.trace_id == run_trace_id(run_id)
    assert run.parent_span_id is None


async def test_an_unsupported_exporter_is_a_usage_error(base_env: dict[str, str]) -> None:
    env = {**base_env, "OTEL_TRACES_EXPORTER": "zipkin"}
    done = await asyncio.to_thread(
        subprocess.run, [*CLI, "workflows", "list"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "OTEL_TRACES_EXPORTER='zipkin' is not supported" in done.stderr
