"""The order workflow of the quickstart: reserve stock, charge the card, wait for
approval, sleep, ship — and compensate (refund, release) when a step fails or the
approval times out."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from azync_flow import ActivityError, RetryPolicy, WorkflowContext, activity, workflow


class Order(msgspec.Struct):
    id: str
    sku: str
    quantity: int
    amount_cents: int
    card: str


class Receipt(msgspec.Struct):
    order_id: str
    status: str
    charge_id: str = ""
    tracking: str = ""
    approved_by: str = ""


@activity(name="reserve_stock")
async def reserve_stock(order: Order) -> str:
    return f"rsv-{order.id}-{order.sku}x{order.quantity}"


@activity(name="release_stock")
async def release_stock(reservation: str) -> None:
    return None


@activity(
    name="charge_card",
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200)),
    idempotent=False,
)
async def charge_card(order: Order) -> str:
    if order.card.startswith("0000"):
        raise ValueError("card declined")
    return f"ch_{order.id}_{order.amount_cents}"


@activity(name="refund")
async def refund(charge_id: str) -> None:
    return None


@activity(name="ship")
async def ship(order: Order) -> str:
    return f"TRACK-{order.id.upper()}"


@workflow(name="order", version="1")
async def order_workflow(ctx: WorkflowContext, order: Order) -> Receipt:
    """Reserve, charge, wait for ``approve`` (1 h), sleep, ship; compensate on failure."""
    reservation = await reserve_stock(order)
    try:
        charge_id = await charge_card(order)
    except ActivityError as err:
        await release_stock(reservation)
        return Receipt(order.id, f"payment failed: {err.message}")
    try:
        approval = await ctx.wait_signal("approve", timeout=timedelta(hours=1))
    except TimeoutError:
        await refund(charge_id)
        await release_stock(reservation)
        return Receipt(order.id, "approval timed out", charge_id)
    await ctx.sleep(timedelta(seconds=1))  # e.g. wait for the warehouse cut-off
    tracking = await ship(order)
    return Receipt(order.id, "shipped", charge_id, tracking, approval.get("by", ""))


WORKFLOWS = [order_workflow]
ACTIVITIES = [reserve_stock, release_stock, charge_card, refund, ship]
