"""The order workflow of the quickstart: reserve stock, charge the card, wait for
approval, sleep, ship — and compensate (refund, release) when a step fails or the
approval times out."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from azync_flow import (
    ActivityError,
    RetryPolicy,
    WorkflowContext,
    activity,
    attach_workflows,
    workflow,
)
from azync_flow.worker import Worker


class Order(msgspec.Struct):
    id: str
    sku: str
    quantity: int
    amount_cents: int
    card: str
    approval_timeout_s: float = 3600.0


class Receipt(msgspec.Struct):
    order_id: str
    status: str
    charge_id: str = ""
    tracking: str = ""
    approved_by: str = ""


def record(step: str, order_id: str) -> None:
    """Append ``step order_id`` to ``$ORDER_LEDGER`` when set (crash_recovery.py counts them)."""
    if ledger := os.environ.get("ORDER_LEDGER"):
        with Path(ledger).open("a") as f:
            f.write(f"{step} {order_id}\n")


@activity(name="reserve_stock")
async def reserve_stock(order: Order) -> str:
    record("reserve_stock", order.id)
    return f"rsv-{order.id}-{order.sku}x{order.quantity}"


@activity(name="release_stock")
async def release_stock(reservation: str) -> None:
    record("release_stock", reservation)
    return None


@activity(
    name="charge_card",
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200)),
    idempotent=False,
)
async def charge_card(order: Order) -> str:
    if order.card.startswith("0000"):
        raise ValueError("card declined")
    record("charge_card", order.id)
    return f"ch_{order.id}_{order.amount_cents}"


@activity(name="refund")
async def refund(charge_id: str) -> None:
    record("refund", charge_id)
    return None


@activity(name="ship")
async def ship(order: Order) -> str:
    record("ship", order.id)
    return f"TRACK-{order.id.upper()}"


@workflow(name="order", version="1")
async def order_workflow(ctx: WorkflowContext, order: Order) -> Receipt:
    """Reserve, charge, wait for ``approve`` (``order.approval_timeout_s``), sleep, ship.

    Compensates in reverse order: a declined charge releases the reservation; an
    approval timeout or a failed shipment refunds the charge and releases the stock.
    """
    reservation = await reserve_stock(order)
    try:
        charge_id = await charge_card(order)
    except ActivityError as err:
        await release_stock(reservation)
        return Receipt(order.id, f"payment failed: {err.message}")
    try:
        approval = await ctx.wait_signal(
            "approve", timeout=timedelta(seconds=order.approval_timeout_s)
        )
    except TimeoutError:
        await refund(charge_id)
        await release_stock(reservation)
        return Receipt(order.id, "approval timed out", charge_id)
    await ctx.sleep(timedelta(seconds=1))  # e.g. wait for the warehouse cut-off
    try:
        tracking = await ship(order)
    except ActivityError as err:
        await refund(charge_id)
        await release_stock(reservation)
        return Receipt(order.id, f"shipping failed: {err.message}", charge_id)
    return Receipt(order.id, "shipped", charge_id, tracking, approval.get("by", ""))


WORKFLOWS = [order_workflow]
ACTIVITIES = [reserve_stock, release_stock, charge_card, refund, ship]


def make_worker(
    store: Any,
    *,
    lease: timedelta = timedelta(seconds=30),
    after_settle: Callable[[Any, str], Any] | None = None,
) -> Worker:
    """A real :class:`~azync_flow.worker.Worker` running the order workflow and its activities.

    Args:
        store: an open ``PostgresStore``.
        lease: lease of each workflow task and activity attempt (renewed while it
            runs); a crashed worker's leased jobs are re-run after it expires.
        after_settle: fault-injection hook called right after an activity's
            completion is committed (``crash_recovery.py`` SIGKILLs itself there).
    """
    worker = Worker(
        store,
        concurrency=8,
        lease=lease,
        poll_interval=timedelta(milliseconds=200),
        maintenance_interval=timedelta(milliseconds=200),
        handle_signals=False,
    )
    runtime = attach_workflows(worker, WORKFLOWS, ACTIVITIES)
    runtime.activities.after_settle = after_settle
    return worker
