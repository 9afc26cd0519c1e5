"""A gracefully stopped worker sends all its spans: every place turning tracing
on registers a flush stop hook, so spans still in the batch processor's queue
(here: a 60 s export delay) reach the real local OTLP receiver by the time the
worker's run() returns."""

from __future__ import annotations

import pytest

from azync_flow import WorkflowContext, activity, attach_dags, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.otlp import configure_otlp
from azync_flow.store.postgres import PostgresStore
from azync_flow.telemetry import flush_spans, trace_jobs
from azync_flow.testing_otel import OtlpHttpReceiver
from azync_flow.worker import Worker


@activity(name="flush_charge")
def flush_charge(order_id: str) -> str:
    return f"charged {order_id}"


@workflow(name="flush_order")
async def flush_order(ctx: WorkflowContext, order_id: str) -> str:
    return await flush_charge(order_id)


@pytest.fixture(autouse=True)
def slow_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a flush sends spans within the test."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")


async def test_graceful_stop_flushes_every_span_of_the_run(store: PostgresStore) -> None:
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp("flush-worker", endpoint=rx.endpoint, set_global=False)
        try:
            worker = Worker(store, handle_signals=False)
            attach_workflows(worker, [flush_order], [flush_charge], tracer_provider=provider)
            handle = await Client(store).start(flush_order, "o-1")
            await worker.run_until_idle()
            assert await handle.result(timeout=5) == "charged o-1"
            # run() returned: the stop hook flushed, nothing waits in the queue
            names = {
                s.name for s in rx.spans() if s.attributes.get("azync.run_id") == str(handle.id)
            }
            assert {"workflow.task flush_order", "activity flush_charge"} <= names
            assert "workflow flush_order" in names  # the run span, ended by this worker
        finally:
            provider.shutdown()


async def test_one_flush_hook_per_provider_however_often_tracing_is_attached(
    store: PostgresStore,
) -> None:
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp("flush-jobs", endpoint=rx.endpoint, set_global=False)
        try:
            worker = Worker(store, handle_signals=False)
            trace_jobs(worker, provider)
            attach_workflows(worker, [flush_order], [flush_charge], tracer_provider=provider)
            attach_dags(worker, [], tracer_provider=provider)
            assert worker.add_stop_hook(f"telemetry.flush_spans.{id(provider):x}", _noop) is False

            @worker.register("flush_job")
            async def job(payload: None) -> None:
                return None

            assert await Client(store).enqueue("flush_job") is not None
            await worker.run_until_idle()
            assert [s.name for s in rx.spans()] == ["job flush_job"]
        finally:
            provider.shutdown()


async def _noop() -> None:
    return None


def test_flush_spans_sends_what_the_queue_holds_now() -> None:
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp("flush-now", endpoint=rx.endpoint, set_global=False)
        try:
            provider.get_tracer("t").start_span("pending").end()
            assert rx.spans() == []
            assert flush_spans(provider, timeout=5) is True
            assert [s.name for s in rx.spans()] == ["pending"]
        finally:
            provider.shutdown()
