"""Queue jobs traced end to end: Client.enqueue carries the caller's trace
context in meta; a worker with trace_jobs(worker) makes one ``job <kind>`` span per
attempt, a child of the caller's span, with the outcome."""

from __future__ import annotations

from datetime import timedelta

from opentelemetry import trace

from azync_flow.client import Client
from azync_flow.errors import Skip
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.telemetry import trace_jobs
from azync_flow.testing_otel import SpanCapture, parent_id
from azync_flow.worker import JobContext, Worker


async def test_each_queue_attempt_is_a_span_under_the_enqueuers_span(
    store: PostgresStore,
) -> None:
    capture = SpanCapture()
    user = capture.provider.get_tracer("app")
    seen: list[int] = []
    worker = Worker(store, handle_signals=False, poll_interval=timedelta(milliseconds=50))
    trace_jobs(worker, capture.provider)

    @worker.register("email", retry=RetryPolicy(initial_interval=timedelta(0), jitter=0))
    async def send(payload: dict[str, str], ctx: JobContext) -> None:
        seen.append(trace.get_current_span().get_span_context().span_id)
        if ctx.attempt == 1:
            raise ConnectionError("smtp down")

    @worker.register("noop")
    async def noop(payload: None) -> None:
        raise Skip("nothing to do")

    client = Client(store)
    with user.start_as_current_span("POST /signup") as request:
        assert await client.enqueue("email", {"to": "ann@example.com"}) is not None
        assert await client.enqueue("noop") is not None
    await worker.run_until_idle()

    emails = capture.named("job email")
    assert [s.attributes["azync.outcome"] for s in emails] == ["retried", "succeeded"]
    assert [s.attributes["azync.attempt"] for s in emails] == [1, 2]
    assert emails[0].status.status_code.name == "ERROR"
    for s in emails:
        assert parent_id(s) == request.get_span_context().span_id
        assert s.context.trace_id == request.get_span_context().trace_id
    assert seen == [s.context.span_id for s in emails]  # handlers run inside their span
    [skipped] = capture.named("job noop")
    assert skipped.attributes["azync.outcome"] == "skipped"
