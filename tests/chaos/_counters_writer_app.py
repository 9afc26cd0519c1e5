"""A writer process of test_counters_kill: ``_counters_writer_app.py DSN SCHEMA MODE``.

Modes (each runs until killed or SECONDS pass, printing "ready" once started):

* ``queue``: enqueue jobs of three kinds, lease them, and settle them by ack,
  skip, dead or a retry reschedule, in concurrent lanes;
* ``events``: publish events (half inside its own transactions with ``conn=``,
  a fifth of those rolled back) to two registered subscribers;
* ``starts``: start executions of ``counted_wf`` by name;
* ``worker``: a real worker running ``counted_wf`` (one activity), the events'
  subscribers and the leader maintenance (which folds the counters).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from datetime import timedelta

from azync_flow import WorkflowContext, activity, attach_subscribers, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.events import EventContext, subscriber
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, EnqueueParams, Source
from azync_flow.worker import Worker

DSN, SCHEMA, MODE = sys.argv[1:4]
SECONDS = float(os.environ.get("SECONDS_", "8"))
LANES = 4


@activity(name="counted_act")
async def counted_act(i: int) -> int:
    return i + 1


@workflow(name="counted_wf")
async def counted_wf(ctx: WorkflowContext, i: int) -> int:
    return await counted_act(i)


@subscriber("counted.evt", name="counted_sub_a")
async def sub_a(payload: dict[str, int], ctx: EventContext) -> None:
    return None


@subscriber("counted.evt", name="counted_sub_b")
async def sub_b(payload: dict[str, int], ctx: EventContext) -> None:
    return None


def running(t0: float) -> bool:
    return time.monotonic() - t0 < SECONDS


async def queue_lane(store: PostgresStore, lane: int, t0: float) -> None:
    n = 0
    while running(t0):
        kind = f"counted_q{n % 3}"
        await store.enqueue(EnqueueParams(id=uuid.uuid4(), kind=kind, payload=b"null"))
        jobs = await store.dequeue_batch(
            Source.QUEUE, DequeueParams(kind=kind, limit=2, lease=timedelta(minutes=10))
        )
        for job in jobs:
            pick = (n + lane) % 4
            if pick == 0:
                await store.ack(job.id, job.lease_token)
            elif pick == 1:
                await store.skip(job.id, job.lease_token, "skipped")
            elif pick == 2:
                await store.dead(job.id, job.lease_token, "dead")
            else:
                await store.reschedule(job.id, job.lease_token, timedelta(0), "retry")
        n += 1


async def events_lane(store: PostgresStore, client: Client, lane: int, t0: float) -> None:
    n = 0
    while running(t0):
        if n % 2:
            await client.publish("counted.evt", {"n": n})
        else:
            async with store.pool.acquire() as conn:
                tx = conn.transaction()
                await tx.start()
                await client.publish("counted.evt", {"n": n}, conn=conn)
                if n % 10 == 0:
                    await tx.rollback()
                else:
                    await tx.commit()
        n += 1


async def starts_lane(client: Client, t0: float) -> None:
    n = 0
    while running(t0):
        await client.start("counted_wf", n)
        n += 1


async def main() -> None:
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}application_name={SCHEMA}-{MODE}"
    store = await open_store(dsn, Config(schema=SCHEMA, max_pool_size=LANES + 8), migrate=False)
    client = Client(store)
    t0 = time.monotonic()
    print("ready", flush=True)
    try:
        if MODE == "queue":
            await asyncio.gather(*(queue_lane(store, k, t0) for k in range(LANES)))
        elif MODE == "events":
            await asyncio.gather(*(events_lane(store, client, k, t0) for k in range(LANES)))
        elif MODE == "starts":
            await asyncio.gather(*(starts_lane(client, t0) for _ in range(LANES)))
        else:
            worker = Worker(
                store,
                poll_interval=timedelta(milliseconds=100),
                maintenance_interval=timedelta(milliseconds=200),
                maintain=(),
                handle_signals=False,
            )
            attach_workflows(worker, [counted_wf], [counted_act])
            await attach_subscribers(worker, [sub_a, sub_b]).register()
            async with worker:
                await asyncio.sleep(SECONDS)
    finally:
        await store.close()


asyncio.run(main())
