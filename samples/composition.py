"""Composing workflows: an order that runs a payment child and a shipping child,
and a subscription that continues as new at each billing period.

    python samples/composition.py               # order paid and shipped, 3 billing periods
    python samples/composition.py --decline     # the payment child fails: the order is declined

Uses ``$AZYNC_DSN`` when set, else an embedded PostgreSQL whose data directory
is printed and kept. ``$AZYNC_SCHEMA`` picks the Postgres schema (default ``public``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from datetime import timedelta
from typing import Any

import msgspec

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.errors import ChildWorkflowError
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext


class Order(msgspec.Struct):
    id: str
    amount_cents: int
    card: str
    address: str


class Receipt(msgspec.Struct):
    order_id: str
    status: str  # "shipped" | "declined"
    charge_id: str = ""
    tracking: str = ""
    reason: str = ""


class Subscription(msgspec.Struct):
    customer: str
    period: int = 1  # billing period of this run (1, 2, ...)
    periods: int = 3  # bill this many periods, then end
    period_seconds: float = 0.3
    invoices: list[str] = msgspec.field(default_factory=list)


# --- activities --------------------------------------------------------------------


@activity(name="charge_card")
def charge_card(order_id: str, amount_cents: int, card: str) -> str:
    if card.endswith("0000"):
        raise ValueError(f"card ending {card[-4:]} declined")
    return f"ch-{order_id}"


@activity(name="create_label")
def create_label(order_id: str, address: str) -> str:
    return f"trk-{order_id}-{len(address)}"


@activity(name="send_invoice")
def send_invoice(customer: str, period: int) -> str:
    return f"inv-{customer}-{period}"


# --- the order and its two children --------------------------------------------------------


@workflow(name="order_payment")
async def payment(ctx: WorkflowContext, order: Order) -> str:
    """Charge the order's card (a child of ``checkout``)."""
    return str(await charge_card(order.id, order.amount_cents, order.card))


@workflow(name="order_shipping")
async def shipping(ctx: WorkflowContext, order: Order) -> str:
    """Create the shipping label and wait for the carrier's pickup scan."""
    tracking = str(await create_label(order.id, order.address))
    await ctx.wait_signal("picked_up", timeout=timedelta(days=2))
    return tracking


@workflow(name="checkout")
async def checkout(ctx: WorkflowContext, order: Order) -> Receipt:
    """Pay (a child), then ship (another child the order signals when the parcel
    leaves). A failed payment declines the order; the shipping child is never
    started."""
    try:
        charge_id = await ctx.execute_child(payment, order)
    except ChildWorkflowError as err:
        return Receipt(order.id, "declined", reason=f"{err.error_type}: {err.message}")
    ship = await ctx.start_child(shipping, order)
    await ship.signal("picked_up", {"by": "carrier"})
    tracking = await ship.result()
    return Receipt(order.id, "shipped", charge_id=charge_id, tracking=tracking)


# --- a subscription that never grows its history ----------------------------------------


@workflow(name="subscription")
async def subscription(ctx: WorkflowContext, sub: Subscription) -> dict[str, Any]:
    """Bill one period, wait for its end (or a ``cancel`` signal), then continue
    as new with the next period: each run's history holds one period only."""
    invoices = [*sub.invoices, await send_invoice(sub.customer, sub.period)]
    try:
        reason = await ctx.wait_signal("cancel", timeout=sub.period_seconds)
        return {"status": "cancelled", "reason": reason, "invoices": invoices}
    except TimeoutError:
        pass
    if sub.period >= sub.periods:
        return {"status": "ended", "invoices": invoices}
    ctx.continue_as_new(
        Subscription(sub.customer, sub.period + 1, sub.periods, sub.period_seconds, invoices)
    )


WORKFLOWS = [payment, shipping, checkout, subscription]
ACTIVITIES = [charge_card, create_label, send_invoice]


def make_worker(store: Any) -> Worker:
    """A real worker running these workflows and activities."""
    worker = Worker(
        store,
        concurrency=8,
        poll_interval=timedelta(milliseconds=200),
        maintenance_interval=timedelta(milliseconds=200),
        handle_signals=False,
    )
    attach_workflows(worker, WORKFLOWS, ACTIVITIES)
    return worker


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decline", action="store_true", help="use a card that is declined")
    args = parser.parse_args()
    dsn, where = resolve_dsn()
    print(f"database:  {where}")
    store = await open_store(dsn, Config(schema=os.environ.get("AZYNC_SCHEMA", "")))
    client = Client(store)
    try:
        async with make_worker(store):
            card = "4111000000000000" if args.decline else "4242424242424242"
            order = Order(f"o-{uuid.uuid4().hex[:6]}", 4999, card, "1 Main St")
            handle = await client.start(checkout, order)
            receipt = await handle.result(timeout=60)
            print(f"order:     {order.id} {receipt.status}", end="")
            print(f" ({receipt.reason})" if receipt.reason else "")
            for child in await store.list_child_workflows(handle.id):
                print(f"  child    {child.name:<15} {child.state:<10} parent={child.parent_id}")
            if receipt.status == "shipped":
                print(f"           charge {receipt.charge_id}, tracking {receipt.tracking}")

            sub = await client.start(subscription, Subscription(f"c-{uuid.uuid4().hex[:4]}"))
            ended = await sub.result(timeout=60)
            print(f"subscription: {ended['status']} after {len(ended['invoices'])} periods")
            for run in await sub.runs():
                print(f"  run {run.run_no}  {run.run_id}  {run.events} history events")
    finally:
        await client.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
