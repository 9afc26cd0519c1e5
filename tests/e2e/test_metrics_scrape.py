"""``azync-flow worker --metrics-port`` serves the metrics for Prometheus: a real
worker process, a real HTTP scrape of ``/metrics``, the exposition parsed with
prometheus_client's parser, and the counters, histograms and gauges checked by
label after workflows with a retried activity, a reaped attempt, an uncertain
operation, a failure, queue jobs, a schedule and a subscriber ran."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from azync_flow.client import Client
from azync_flow.events import register_subscribers
from azync_flow.schedules import EnqueueJob, Interval, ScheduleSpec
from azync_flow.store.postgres import PostgresStore
from tests.e2e._metrics_app import m_audit

ROOT = Path(__file__).resolve().parents[2]

#: (sample name, labels without the OpenTelemetry scope) -> value
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

_SCOPE = ("otel_scope_name", "otel_scope_version", "otel_scope_schema_url")


def _parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = frozenset((k, v) for k, v in s.labels.items() if k not in _SCOPE)
            out[(s.name, labels)] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (keys with ``_`` for ``.``); 0 if absent."""
    want = frozenset(labels.items())
    return samples.get((name, want), 0.0)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        return _parse(reply.read().decode())


def completed(s: Samples, workflow: str) -> float:
    return value(s, "azync_flow_workflow_completed_total", azync_workflow_name=workflow)


def job_attempts(s: Samples, source: str, kind: str, outcome: str) -> float:
    return value(
        s,
        "azync_flow_job_attempts_total",
        azync_source=source,
        azync_job_kind=kind,
        azync_outcome=outcome,
    )


def fires(s: Samples, schedule: str, outcome: str) -> float:
    return value(
        s, "azync_flow_schedule_fires_total", azync_schedule_id=schedule, azync_outcome=outcome
    )


def pending(s: Samples, source: str, kind: str) -> float:
    return value(s, "azync_flow_job_pending", azync_source=source, azync_job_kind=kind)


async def scrape_until(url: str, done: Callable[[Samples], bool]) -> Samples:
    """Scrape until ``done`` holds (waiting on the worker's progress, never on time)."""
    async with asyncio.timeout(90):
        while True:
            samples = await asyncio.to_thread(scrape, url)
            if done(samples):
                return samples
            await asyncio.sleep(0.2)


class WorkerProcess:
    """``azync-flow worker APP --metrics-port 0`` with its metrics URL read from its log."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.log: list[str] = []
        self.url_seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            found = re.search(r"serving metrics on (http://\S+/metrics)", line)
            if found and not self.url_seen.done():
                self.url_seen.set_result(found.group(1))

    async def stop(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        await self._reader
        return code


async def start_worker(env: dict[str, str], *args: str) -> WorkerProcess:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "azync_flow.cli", "worker", "tests.e2e._metrics_app:make_worker",
        "--metrics-port", "0", "--log-level", "INFO", *args,
        cwd=ROOT, env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return WorkerProcess(proc)


@pytest.fixture
def worker_env(pg_dsn: str, store: PostgresStore) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "PYTHONPATH": str(ROOT), "AZYNC_DSN": pg_dsn, "AZYNC_SCHEMA": store.schema}


async def test_a_scrape_of_the_worker_shows_what_ran_by_label(
    store: PostgresStore, worker_env: dict[str, str]
) -> None:
    client = Client(store)
    await register_subscribers(store, [m_audit])
    for _ in range(3):  # no worker handles this kind: they wait, pending
        await client.enqueue("m.nobody", 1)
    worker = await start_worker(worker_env)
    try:
        url = await asyncio.wait_for(worker.url_seen, 60)
        order = await client.start("m_order", 2)
        pay = await client.start("m_pay", 5)
        failing = await client.start("m_fail", 7)
        await client.enqueue("m.job", 1)
        await client.publish("m.placed", {"n": 1})
        await client.schedules.create(
            "m-every-second",
            ScheduleSpec(intervals=(Interval(every=timedelta(seconds=1)),)),
            EnqueueJob.of("m.tick"),
        )
        assert await order.result(timeout=90) == 4
        assert await pay.result(timeout=90) == "charge-5"
        with pytest.raises(Exception, match="order 7 is invalid"):
            await failing.result(timeout=90)

        def ready(s: Samples) -> bool:
            return (
                completed(s, "m_order") == 1
                and completed(s, "m_pay") == 1
                and value(s, "azync_flow_workflow_failed_total", azync_workflow_name="m_fail") == 1
                and job_attempts(s, "queue", "m.job", "succeeded") == 1
                and job_attempts(s, "event", "m-audit", "succeeded") == 1
                and fires(s, "m-every-second", "started") >= 1
                and pending(s, "queue", "m.nobody") == 3
            )

        s = await scrape_until(url, ready)
    finally:
        assert await worker.stop() == 0, "\n".join(worker.log)

    def attempts(activity: str, outcome: str) -> float:
        return value(
            s,
            "azync_flow_activity_attempts_total",
            azync_activity_name=activity,
            azync_outcome=outcome,
        )

    def duration_count(activity: str, outcome: str) -> float:
        return value(
            s,
            "azync_flow_activity_duration_seconds_count",
            azync_activity_name=activity,
            azync_outcome=outcome,
        )

    # workflows
    for name in ("m_order", "m_pay", "m_fail"):
        assert value(s, "azync_flow_workflow_started_total", azync_workflow_name=name) == 1
    suspended = "azync_flow_workflow_suspended_total"
    assert value(s, suspended, azync_workflow_name="m_pay", azync_reason="uncertain") == 1
    passes = "azync_flow_workflow_task_duration_seconds_count"
    assert value(s, passes, azync_workflow_name="m_order", azync_outcome="succeeded") >= 3
    # activities: the failing-then-succeeding one, the reaped one, the uncertain one
    assert (attempts("m_flaky", "retried"), attempts("m_flaky", "succeeded")) == (1, 1)
    assert (duration_count("m_flaky", "retried"), duration_count("m_flaky", "succeeded")) == (1, 1)
    assert (attempts("m_stuck", "retried"), attempts("m_stuck", "succeeded")) == (1, 1)
    assert duration_count("m_stuck", "retried") == 0  # a lost attempt has no latency
    assert attempts("m_charge", "uncertain") == 1
    assert value(s, "azync_flow_operation_uncertain_total", azync_activity_name="m_charge") == 1
    resolved = "azync_flow_operation_uncertain_resolved_total"
    assert value(s, resolved, azync_activity_name="m_charge", azync_resolution="complete") == 1
    # the reaper
    assert value(s, "azync_flow_reaps_total", azync_kind="activity", azync_outcome="retried") == 1
    # queue jobs and event deliveries
    assert job_attempts(s, "queue", "m.job", "retried") == 1
    assert job_attempts(s, "event", "m-audit", "retried") == 1
    wait = "azync_flow_job_schedule_to_start_seconds_count"
    assert value(s, wait, azync_source="workflow", azync_job_kind="$wft") >= 3
    assert value(s, wait, azync_source="workflow", azync_job_kind="$op:m_flaky@1") >= 2
    assert value(s, wait, azync_source="event", azync_job_kind="m-audit") == 2
    # the schedule
    lag = "azync_flow_schedule_lag_seconds_count"
    assert value(s, lag, azync_schedule_id="m-every-second") >= 1
    # the backlog gauges (leader's snapshot)
    age = ("azync_flow_job_oldest_pending_age_seconds",
           frozenset({("azync_source", "queue"), ("azync_job_kind", "m.nobody")}))  # fmt: skip
    assert s[age] >= 0
    # leadership
    changes = "azync_flow_leadership_changes_total"
    assert value(s, changes, azync_leadership="azync_flow.stats", azync_change="acquired") >= 1
    assert value(s, "azync_flow_leadership_held", azync_leadership="azync_flow.stats") == 1


async def test_a_metrics_port_in_use_is_a_usage_error(worker_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "azync_flow.cli", "worker",
             "tests.e2e._metrics_app:make_worker", "--metrics-port", str(port)],
            cwd=ROOT, env=worker_env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--metrics-port: cannot serve on 127.0.0.1:{port}" in done.stderr
