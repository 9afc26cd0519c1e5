"""A shopping cart workflow driven by queries and updates: ``add_item`` is an
update (validated, reserves stock through an activity, returns the new item
count), ``summary`` a query (read-only), ``checkout`` a signal that ends it.

Uses ``$AZYNC_DSN`` when set, else the embedded PostgreSQL;
``$AZYNC_SCHEMA`` picks the Postgres schema (default ``public``).

    python samples/shopping_cart.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta

import msgspec

from azync_flow import Client, WorkflowContext, activity, attach_workflows, workflow
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


class Line(msgspec.Struct):
    sku: str
    quantity: int
    reservation: str


class Summary(msgspec.Struct):
    customer: str
    lines: list[Line]
    status: str


@activity(name="cart_reserve_stock")
async def reserve_stock(sku: str, quantity: int) -> str:
    return f"rsv-{sku}x{quantity}"


def check_line(sku: str, quantity: int) -> None:
    """Validator of ``add_item``: a rejected request leaves no trace in history."""
    if not sku:
        raise ValueError("a SKU is required")
    if not 1 <= quantity <= 10:
        raise ValueError(f"quantity must be 1..10, got {quantity}")


@workflow(name="shopping_cart")
async def shopping_cart(ctx: WorkflowContext, customer: str) -> Summary:
    lines: list[Line] = []
    status = "open"

    @ctx.query()
    def summary() -> Summary:
        return Summary(customer, list(lines), status)

    @ctx.update(validator=check_line)
    async def add_item(sku: str, quantity: int) -> int:
        reservation = await reserve_stock(sku, quantity)
        lines.append(Line(sku, quantity, reservation))
        return len(lines)

    await ctx.wait_signal("checkout", timeout=timedelta(days=1))
    status = "checked out"
    return Summary(customer, lines, status)


WORKFLOWS = [shopping_cart]
ACTIVITIES = [reserve_stock]


async def main() -> None:
    dsn, where = resolve_dsn()
    print(f"database:  {where}")
    store = await open_store(dsn, Config(schema=os.environ.get("AZYNC_SCHEMA", "")))
    worker = Worker(store, handle_signals=False)
    attach_workflows(worker, WORKFLOWS, ACTIVITIES)
    client = Client.for_worker(worker)
    try:
        async with worker:
            handle = await client.start(shopping_cart, f"customer-{uuid.uuid4().hex[:6]}")
            print("items:    ", await handle.update("add_item", "sku-42", 2, update_id="line-1"))
            print("items:    ", await handle.update("add_item", "sku-7", 1, update_id="line-2"))
            # a retried request (same id) gets the same answer; the handler ran once
            print("retried:  ", await handle.update("add_item", "sku-7", 1, update_id="line-2"))
            try:
                await handle.update("add_item", "sku-9", 99)
            except Exception as err:
                print("rejected: ", err)
            print("summary:  ", await handle.query("summary", type=Summary))
            await handle.signal("checkout")
            print("result:   ", await handle.result(timeout=30))
            kinds = [type(e.event).__name__ for e in await handle.history()]
            print("history:  ", ", ".join(kinds))
    finally:
        await client.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
