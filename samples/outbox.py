"""The outbox pattern: an order row and its ``order.placed`` event commit together.

    python samples/outbox.py

Places two orders with the application's own asyncpg connection. Each order
row and its ``order.placed`` event are written in ONE transaction of the
application: the first commits (its event is delivered), the second rolls
back (no row, no event, nothing shipped). A subscriber, run by a worker,
ships each placed order and marks its row shipped.

Uses ``$AZYNC_DSN`` when set, else the embedded PostgreSQL;
``$AZYNC_SCHEMA`` picks the Postgres schema (default ``public``).
"""

from __future__ import annotations

import asyncio
import os
import uuid

import asyncpg
import msgspec

from azync_flow import attach_subscribers
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.errors import NotFoundError
from azync_flow.events import EventContext, subscriber
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


class OrderPlaced(msgspec.Struct):
    order_id: str
    cents: int


#: The application's connection pool, set in main() (the subscriber updates rows with it).
APP: dict[str, asyncpg.Pool] = {}


@subscriber("order.placed", name="shipper", retry=RetryPolicy(maximum_attempts=5))
async def ship(order: OrderPlaced, ctx: EventContext) -> None:
    # Idempotent on the event id: a redelivery finds the row already shipped.
    await APP["pool"].execute(
        "UPDATE outbox_orders SET shipped_by_event = $2 WHERE id = $1 AND shipped_by_event IS NULL",
        order.order_id,
        ctx.event_id,
    )
    print(f"shipped {order.order_id} ({order.cents} cents), event {ctx.event_id}")


async def place_order(
    client: Client, order_id: str, cents: int, *, fail: bool
) -> tuple[uuid.UUID, bool]:
    """Insert the order and publish its event in one transaction of the
    application; returns the event id and whether the transaction committed."""
    event_id = uuid.uuid4()
    try:
        async with APP["pool"].acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO outbox_orders (id, cents) VALUES ($1, $2)", order_id, cents
            )
            await client.publish(
                "order.placed", OrderPlaced(order_id, cents), key=order_id, id=event_id, conn=conn
            )
            if fail:
                raise RuntimeError("payment service refused the order")
    except RuntimeError as err:
        print(f"order {order_id}: transaction rolled back ({err})")
        return event_id, False
    print(f"order {order_id}: committed with event {event_id}")
    return event_id, True


async def main() -> None:
    dsn, where = resolve_dsn()
    schema = os.environ.get("AZYNC_SCHEMA", "")
    print(f"database:  {where}")
    store = await open_store(dsn, Config(schema=schema))  # migrates
    pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=4, server_settings={"search_path": f'"{store.schema}"'}
    )
    APP["pool"] = pool
    try:
        await pool.execute(
            "CREATE TABLE IF NOT EXISTS outbox_orders ("
            " id text PRIMARY KEY, cents int NOT NULL, shipped_by_event uuid)"
        )
        worker = Worker(store, handle_signals=False)
        await attach_subscribers(worker, [ship]).register()
        client = Client(store)
        suffix = uuid.uuid4().hex[:6]
        committed, _ = await place_order(client, f"o-{suffix}-1", 1999, fail=False)
        rolled_back, _ = await place_order(client, f"o-{suffix}-2", 500, fail=True)
        async with asyncio.timeout(60):
            await worker.run_until_idle()
        rows = await pool.fetch(
            "SELECT id, shipped_by_event FROM outbox_orders WHERE id LIKE $1 ORDER BY id",
            f"o-{suffix}-%",
        )
        print("orders in the table:")
        for row in rows:
            print(f"  {row['id']}  shipped by event {row['shipped_by_event']}")
        delivered = await store.get_event(committed)
        print(f"committed order: event in the ledger with {delivered.deliveries} delivery")
        try:
            await store.get_event(rolled_back)
            print("rolled-back order: its event is in the ledger (WRONG)")
        except NotFoundError:
            print("rolled-back order: no row, no event")
    finally:
        await pool.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
