"""A tiny queue app: enqueue a few jobs, run a worker until idle, print what happened.

    python samples/queue_demo.py

Uses ``$AZYNC_DSN`` when set, otherwise starts an embedded PostgreSQL (extra
``azync-flow[embedded]``). The demo works in its own schema and drops it at the end.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow.embedded import resolve_dsn
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.queue import EnqueueParams, JobState, Source
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.worker import JobContext, Worker


class Invoice(msgspec.Struct):
    customer: str
    cents: int


async def main() -> None:
    dsn, where = resolve_dsn()
    print(f"using {where}")
    schema = unique_schema("demo")
    store = await open_store(dsn, Config(schema=schema))
    results: list[str] = []
    try:
        worker = Worker(
            store,
            poll_interval=timedelta(milliseconds=200),
            maintenance_interval=timedelta(milliseconds=50),
            retry=RetryPolicy(initial_interval=timedelta(milliseconds=100), jitter=0.1),
            handle_signals=False,
        )

        @worker.register("invoice.send", concurrency=4)
        async def send_invoice(invoice: Invoice, ctx: JobContext) -> None:
            if invoice.cents < 0:
                raise ValueError(f"negative amount {invoice.cents}")
            if ctx.attempt == 1 and invoice.customer == "flaky-corp":
                raise ConnectionError("mail server busy")  # retried with backoff
            results.append(f"sent {invoice.cents / 100:.2f} EUR to {invoice.customer}")

        invoices = [
            Invoice("acme", 12_50),
            Invoice("flaky-corp", 99_00),
            Invoice("globex", 5_00),
            Invoice("bad-data", -1),
        ]
        ids = {}
        for inv in invoices:
            job_id = uuid.uuid4()
            await store.enqueue(
                EnqueueParams(
                    id=job_id,
                    kind="invoice.send",
                    payload=msgspec.json.encode(inv),
                    max_attempts=2,
                    max_attempts_explicit=True,
                )
            )
            ids[job_id] = inv.customer

        # Runs until nothing is runnable; the retry is 100 ms out, so go again.
        for _ in range(20):
            await worker.run_until_idle()
            states = [(await store.get_job(Source.QUEUE, i)).state for i in ids]
            if all(s in (JobState.SUCCEEDED, JobState.DEAD) for s in states):
                break
            await asyncio.sleep(0.1)

        for line in results:
            print(line)
        for job_id, customer in ids.items():
            job = await store.get_job(Source.QUEUE, job_id)
            note = f" ({job.last_error})" if job.last_error else ""
            print(f"{customer:<11} {job.state:<10} attempts={job.attempt}{note}")
    finally:
        await store.close()
        await drop_schema(dsn, schema)


if __name__ == "__main__":
    asyncio.run(main())
