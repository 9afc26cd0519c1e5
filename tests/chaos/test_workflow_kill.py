"""Real SIGKILLs of worker processes (a real Worker with the workflow runtime,
1.5 s leases): between activities, during an idempotent activity (re-run once),
during a non-idempotent one (uncertain, never re-run), in the middle of a
workflow pass (reaped and re-run) and while a durable timer is pending.

Every scenario checks that each COMPLETED activity ran exactly once, in both
cache modes."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import RunTracer, run_span_id
from azync_flow.testing_otel import OtlpHttpReceiver, SpanCapture, nesting_violations

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_workflow_kill_app.py")


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_workflow_kill_app", APP)
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


APP_MODULE = load_app()


@pytest.fixture(autouse=True, params=["1000", "0"], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every scenario runs with the sticky cache on and off (full replay each pass)."""
    monkeypatch.setenv("CACHE_SIZE", request.param)
    return str(request.param)


async def run_worker(
    pg_dsn: str, schema: str, run_id: Any, ledger: Path, mode: str = "", **env: str
) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        str(run_id),
        env={
            **os.environ,
            "KILL_LEDGER": str(ledger),
            "KILL_MODE": mode,
            "PYTHONPATH": str(ROOT),
            **env,
        },
    )
    return await asyncio.wait_for(proc.wait(), 60)


def lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines()


def seen(ledger: Path, line: str) -> bool:
    return ledger.exists() and line in lines(ledger)


def done_steps(ledger: Path) -> list[str]:
    return [line for line in lines(ledger) if line.startswith("done:")]


async def event_types(handle: Any) -> list[str]:
    return [type(e.event).__name__ for e in await handle.history()]


async def test_sigkill_between_activities_then_new_worker_completes_each_step_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-7")
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "after:charge")
    assert code == -signal.SIGKILL
    assert done_steps(ledger) == ["done:reserve:o-7", "done:charge:o-7"]
    assert (await handle.describe()).state == WorkflowState.RUNNING
    # charge's outcome survived the kill (alone, or with the pass that scheduled ship)
    assert (await event_types(handle)).count("ActivityCompleted") == 2
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["reserve-done", "charge-done", "ship-done"]
    assert done_steps(ledger) == ["done:reserve:o-7", "done:charge:o-7", "done:ship:o-7"]


async def test_sigkill_during_idempotent_activity_reruns_it_once_after_lease_expiry(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-8")
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "during:charge")
    assert code == -signal.SIGKILL
    assert lines(ledger)[-1] == "start:charge:o-8"  # died inside the activity
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["reserve-done", "charge-done", "ship-done"]
    # the killed attempt started, the re-run (after the reaper) completed: once each
    assert lines(ledger).count("start:charge:o-8") == 2
    assert done_steps(ledger) == ["done:reserve:o-8", "done:charge:o-8", "done:ship:o-8"]
    completed = [
        e.event for e in await handle.history() if type(e.event).__name__ == "ActivityCompleted"
    ]
    assert len(completed) == 3
    charge_job = await store.pool.fetchrow(
        "SELECT attempt, reap_count, state FROM azync_jobs WHERE kind = '$op:charge@1'"
    )
    assert charge_job["state"] == "succeeded"
    assert charge_job["reap_count"] == 1


async def test_sigkill_during_non_idempotent_activity_parks_it_uncertain_never_reruns(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    client = Client(store)
    handle = await client.start(APP_MODULE.wire_order, "o-9")
    assert await run_worker(pg_dsn, schema, handle.id, ledger, "during:wire") == -signal.SIGKILL
    # a new worker's leader parks the expired attempt as uncertain; nothing re-runs it
    assert await run_worker(pg_dsn, schema, handle.id, ledger, UNTIL="suspended") == 0
    assert lines(ledger) == ["start:wire:o-9"]
    [op] = await client.list_uncertain(handle.id)
    assert "lease" in op.reason
    capture = SpanCapture()
    client.tracer = RunTracer(capture.provider)
    await client.resolve_uncertain(op, "complete", result="wired-by-hand", decided_by="ops")
    [event] = capture.named("uncertain.resolved wire")
    assert event.attributes["azync.resolution"] == "complete"
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == "wired-by-hand"
    assert lines(ledger) == ["start:wire:o-9"]


async def test_workflow_task_of_a_killed_worker_is_reaped_and_rerun(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.killable_order, "o-10")
    # dies in its 2nd pass (after reserve), before committing it: the task stays active
    # (local dispatch off: with it the 2nd pass is folded into reserve's completion)
    code = await run_worker(pg_dsn, schema, handle.id, ledger, "in_pass:2", LOCAL_DISPATCH="0")
    assert code == -signal.SIGKILL
    active = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE kind = '$wft' AND state = 'active'"
    )
    assert active == 1
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["reserve-done", "charge-done", "ship-done"]
    reaped = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE kind = '$wft' AND reap_count = 1"
    )
    assert reaped == 1
    assert done_steps(ledger) == ["done:reserve:o-10", "done:charge:o-10", "done:ship:o-10"]


async def test_durable_timer_survives_a_worker_kill(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.sleepy_order, "o-11")
    # pass 2 starts the 2 s timer; the worker dies right after committing it
    assert await run_worker(pg_dsn, schema, handle.id, ledger, "after_pass:2") == -signal.SIGKILL
    assert "TimerStarted" in await event_types(handle)
    assert done_steps(ledger) == ["done:reserve:o-11"]
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["reserve-done", "ship-done"]
    types = await event_types(handle)
    assert types.index("TimerFired") > types.index("TimerStarted")
    view = await handle.describe()
    assert view.completed_at is not None
    assert (view.completed_at - view.created_at).total_seconds() >= 2
    assert done_steps(ledger) == ["done:reserve:o-11", "done:ship:o-11"]


async def traced_kill_run(
    client: Client,
    workflow: Any,
    order_id: str,
    mode: str,
    pg_dsn: str,
    schema: str,
    ledger: Path,
    last_span: str,
    **worker_env: str,
) -> tuple[Any, list[Any]]:
    """Worker 1 (killed at ``mode``) and worker 2 (finishes the run) export over real
    OTLP/HTTP to an in-test receiver; returns the handle and every span received."""
    with OtlpHttpReceiver() as rx:
        handle = await client.start(workflow, order_id)
        env = {"OTLP_ENDPOINT": rx.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        code = await run_worker(
            pg_dsn, schema, handle.id, ledger, mode, WORKER_NAME="worker-1", **env, **worker_env
        )
        assert code == -signal.SIGKILL
        code = await run_worker(pg_dsn, schema, handle.id, ledger, WORKER_NAME="worker-2", **env)
        assert code == 0
        spans = await asyncio.to_thread(
            rx.wait_for, lambda got: any(s.name == last_span for s in got)
        )
    return handle, spans


async def assert_one_well_formed_trace(handle: Any, spans: list[Any], workflow: str) -> list[Any]:
    """The checks every run's trace passes, however many workers and crashes it took:
    one run span, exported once by the worker that completed the run, covering the
    run from its recorded start; every other span its child, nested inside it; the
    completing pass has its span. Returns the workflow.task spans."""
    [run] = [s for s in spans if s.name == f"workflow {workflow}"]
    assert run.span_id == run_span_id(handle.id)
    assert (run.parent_span_id, run.service_name) == (None, "worker-2")
    assert run.attributes["azync.state"] == "succeeded"
    view = await handle.describe()
    assert run.start_time == int(view.created_at.timestamp() * 1e6) * 1000
    assert {s.trace_id for s in spans} == {run.trace_id}
    for s in spans:
        if s is not run:
            assert s.parent_span_id == run.span_id, s.name
    assert nesting_violations(spans) == []
    assert max(s.end_time for s in spans) == run.end_time
    passes = [s for s in spans if s.name == f"workflow.task {workflow}"]
    history = await handle.history()
    [completed] = [e for e in history if type(e.event).__name__ == "WorkflowCompleted"]
    ran = [p.attributes for p in passes if "azync.new_commands" in p.attributes]  # not lost
    assert max(a["azync.seq"] + a["azync.new_commands"] - 1 for a in ran) == completed.seq
    return passes


async def test_span_tree_across_two_worker_processes_and_a_kill_inside_an_activity(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Worker 1 runs reserve then is SIGKILLed inside charge; worker 2 (another
    process) reaps the lost attempt, re-runs charge and finishes. One trace: the
    run span, one span per attempt (the lost one closed by the reaper with ERROR
    ``lease expired``), no duplicate span for replayed steps."""
    client = Client(store, tracer_provider=SpanCapture(service_name="api").provider)
    handle, spans = await traced_kill_run(
        client,
        APP_MODULE.killable_order,
        "o-12",
        "during:charge",
        pg_dsn,
        schema,
        tmp_path / "ledger",
        "workflow killable_order",
    )
    assert await handle.result(timeout=5) == ["reserve-done", "charge-done", "ship-done"]
    passes = await assert_one_well_formed_trace(handle, spans, "killable_order")
    by_name: dict[str, list[Any]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert [s.service_name for s in by_name["activity reserve"]] == ["worker-1"]
    # attempt 1 of charge died with worker 1: worker 2's reaper closed its span
    lost, charge = sorted(by_name["activity charge"], key=lambda s: s.attributes["azync.attempt"])
    assert (lost.service_name, lost.attributes["azync.attempt"]) == ("worker-2", 1)
    assert (lost.status_code, lost.status_message) == (
        PbStatus.STATUS_CODE_ERROR,
        "lease expired",
    )
    assert lost.attributes["azync.outcome"] == "retried"
    assert (charge.service_name, charge.attributes["azync.attempt"]) == ("worker-2", 2)
    assert charge.attributes["azync.outcome"] == "succeeded"
    assert [s.service_name for s in by_name["activity ship"]] == ["worker-2"]
    assert {s.service_name for s in passes} == {"worker-1", "worker-2"}
    assert all(s.attributes["azync.outcome"] == "succeeded" for s in passes)
    # every pass wrote new events; worker 2 replayed worker 1's history
    first_seqs = [s.attributes["azync.seq"] for s in passes]
    assert len(first_seqs) == len(set(first_seqs))


async def test_span_tree_across_a_kill_while_the_workflow_sleeps(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Worker 1 runs reserve and starts the 2 s ctx.sleep, then is SIGKILLed while
    the workflow sleeps; worker 2 fires the timer and completes the run. The run
    span covers the whole run (the sleep included), exported once, by worker 2."""
    client = Client(store, tracer_provider=SpanCapture(service_name="api").provider)
    handle, spans = await traced_kill_run(
        client,
        APP_MODULE.sleepy_order,
        "o-13",
        "sleeping:2",
        pg_dsn,
        schema,
        tmp_path / "ledger",
        "workflow sleepy_order",
    )
    assert await handle.result(timeout=5) == ["reserve-done", "ship-done"]
    passes = await assert_one_well_formed_trace(handle, spans, "sleepy_order")
    assert [s.service_name for s in passes[:2]] == ["worker-1", "worker-1"]
    assert {s.service_name for s in passes[2:]} == {"worker-2"}
    [run] = [s for s in spans if s.name == "workflow sleepy_order"]
    assert run.end_time - run.start_time >= 2 * 10**9
    [fired] = [s for s in spans if s.name == "timer.fired"]
    assert fired.service_name == "worker-2"
    assert [s for s in spans if s.status_code == PbStatus.STATUS_CODE_ERROR] == []


async def frozen_worker_run(
    client: Client,
    pg_dsn: str,
    schema: str,
    ledger: Path,
    order_id: str,
    mode: str,
    mark: str,
    **worker_env: str,
) -> tuple[Any, list[Any]]:
    """Worker 1 (fault ``mode``) is frozen (SIGSTOP) once ``mark`` is in the ledger;
    worker 2 finishes the run; then worker 1 is resumed and exits. Both export over
    real OTLP/HTTP; returns the handle and every span received."""
    handle = await client.start(APP_MODULE.killable_order, order_id)
    with OtlpHttpReceiver() as rx:
        env = {"OTLP_ENDPOINT": rx.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        frozen = await asyncio.create_subprocess_exec(
            sys.executable,
            str(APP),
            pg_dsn,
            schema,
            str(handle.id),
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "KILL_LEDGER": str(ledger),
                "KILL_MODE": mode,
                "WORKER_NAME": "worker-1",
                **env,
                **worker_env,
            },
        )
        try:
            for _ in range(500):
                if seen(ledger, mark):
                    break
                await asyncio.sleep(0.02)
            frozen.send_signal(signal.SIGSTOP)
            code = await run_worker(
                pg_dsn, schema, handle.id, ledger, WORKER_NAME="worker-2", **env
            )
            assert code == 0
        finally:
            frozen.send_signal(signal.SIGCONT)
        assert await asyncio.wait_for(frozen.wait(), 60) == 0  # it flushed its spans
        spans = rx.spans()
    assert await handle.result(timeout=5) == ["reserve-done", "charge-done", "ship-done"]
    return handle, spans


async def test_a_frozen_worker_resumed_after_the_run_ended_exports_no_second_attempt_span(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Worker 1 is frozen (SIGSTOP) inside charge; worker 2 takes the maintenance
    leadership, reaps the lost attempt (closing its span), re-runs charge and
    finishes the run. Worker 1, resumed, finds its lease gone: its own span of
    attempt 1 is not exported, so the attempt is shown once and nothing ends
    after the run span."""
    client = Client(store, tracer_provider=SpanCapture(service_name="api").provider)
    handle, spans = await frozen_worker_run(
        client, pg_dsn, schema, tmp_path / "ledger", "o-15", "stall:charge", "start:charge:o-15"
    )
    await assert_one_well_formed_trace(handle, spans, "killable_order")
    charges = sorted(
        (s.attributes["azync.attempt"], s.service_name, s.status_message)
        for s in spans
        if s.name == "activity charge"
    )
    assert charges == [(1, "worker-2", "lease expired"), (2, "worker-2", "")]


async def test_a_pass_frozen_past_the_run_end_is_shown_once_by_the_reaper(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Worker 1 is frozen in the middle of its 2nd pass; worker 2 reaps the pass
    (closing its span with ``lease expired``) and finishes the run. Worker 1,
    resumed, loses its commit: that pass exports no second span. (Local dispatch
    off: the 2nd pass is carried by a workflow task.)"""
    client = Client(store, tracer_provider=SpanCapture(service_name="api").provider)
    handle, spans = await frozen_worker_run(
        client,
        pg_dsn,
        schema,
        tmp_path / "ledger",
        "o-16",
        "stall_pass:2",
        "stall:pass:2",
        LOCAL_DISPATCH="0",  # the 2nd pass carried by a workflow task (not folded)
    )
    passes = await assert_one_well_formed_trace(handle, spans, "killable_order")
    mine = [s for s in passes if s.service_name == "worker-1"]
    assert [s.attributes.get("azync.outcome") for s in mine] == ["succeeded"]  # pass 1 only
    lost = [s for s in passes if s.status_message == "lease expired"]
    assert [s.service_name for s in lost] == ["worker-2"]


async def test_a_pass_lost_with_its_worker_is_closed_by_the_reaper(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    """Worker 1 is SIGKILLed in the middle of its 2nd pass; worker 2's reaper closes
    that pass's workflow.task span (ERROR ``lease expired``) and re-runs it. (Local
    dispatch off: the 2nd pass is carried by a workflow task, not folded.)"""
    client = Client(store, tracer_provider=SpanCapture(service_name="api").provider)
    handle, spans = await traced_kill_run(
        client,
        APP_MODULE.killable_order,
        "o-14",
        "in_pass:2",
        pg_dsn,
        schema,
        tmp_path / "ledger",
        "workflow killable_order",
        LOCAL_DISPATCH="0",
    )
    assert await handle.result(timeout=5) == ["reserve-done", "charge-done", "ship-done"]
    passes = await assert_one_well_formed_trace(handle, spans, "killable_order")
    [lost] = [s for s in passes if s.status_code == PbStatus.STATUS_CODE_ERROR]
    assert (lost.service_name, lost.status_message) == ("worker-2", "lease expired")
    assert lost.attributes["azync.outcome"] == "retried"
    assert lost.attributes["azync.attempt"] == 1
