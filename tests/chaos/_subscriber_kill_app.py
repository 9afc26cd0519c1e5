"""A subscriber process of test_subscriber_redelivery: ``_subscriber_kill_app.py DSN SCHEMA``.

Runs a real worker with the ``recorder`` subscriber (concurrency ``CONCURRENCY``)
until killed, printing "ready" once started. Each delivery records its event id
in ``seen`` (its committed effect) and returns. ``ACK_DELAY_`` seconds are added
before each ack statement: a database slow to take acks.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from azync_flow import attach_subscribers
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from tests.chaos._subscriber_recorder import recorder_for, slow_acks

DSN, SCHEMA = sys.argv[1:3]
CONCURRENCY = 10


async def main() -> None:
    store = await open_store(DSN, Config(schema=SCHEMA))
    slow_acks(store, float(os.environ.get("ACK_DELAY_", "0")))
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=50),
        handle_signals=False,
    )
    attach_subscribers(worker, [recorder_for(store, CONCURRENCY, timedelta(seconds=2))])
    task = asyncio.create_task(worker.run())
    await worker.started()
    print("ready", flush=True)
    await task


asyncio.run(main())
