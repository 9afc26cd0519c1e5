"""Quickstart: run the order workflow end to end and print its history.

    python samples/quickstart.py

Uses ``$AZYNC_DSN`` when set, else an embedded PostgreSQL whose data directory is
printed (a second run sees the first run's executions). ``$AZYNC_SCHEMA`` picks
the Postgres schema (default ``public``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from order import ACTIVITIES, WORKFLOWS, Order, order_workflow

from azync_flow import Registry
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.runtime import LocalRuntime
from azync_flow.store import Config
from azync_flow.store.postgres import open_store


async def main() -> None:
    dsn, where = resolve_dsn()
    print(f"using {where}")
    store = await open_store(dsn, Config(schema=os.environ.get("AZYNC_SCHEMA", "")))
    runtime = LocalRuntime(store, Registry(WORKFLOWS, ACTIVITIES))
    stop = asyncio.Event()
    worker = asyncio.create_task(runtime.run(stop))
    try:
        client = Client(store)
        order = Order(f"o-{uuid.uuid4().hex[:6]}", "sku-42", 2, 4999, "4242424242424242")
        handle = await client.start(order_workflow, order)
        print(f"started workflow {handle.id} for order {order.id}")
        await asyncio.sleep(0.3)
        await handle.signal("approve", {"by": "quickstart"}, message_id=f"approve-{order.id}")
        receipt = await handle.result(timeout=30)
        print(f"result: {receipt}")
        print(f"\n{'seq':>4}  {'event':<20} detail")
        for entry in await handle.history():
            print(f"{entry.seq:>4}  {type(entry.event).__name__:<20} {entry.event.describe()}")
    finally:
        stop.set()
        await worker
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
