"""Re-record the samples' histories in this folder (run after an intended change
to a sample workflow; commit the JSON files)::

    AZYNC_TEST_DSN=postgresql://... python -m tests.replay.record [NAME ...]

(all recordings, or only the named ones).

Each history comes from a real run of the sample's workflow on a
``WorkflowEnvironment`` (time skipped), saved as ``recorded_history().to_json()``
— the format ``azync-flow workflows export`` writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "samples"
sys.path.insert(0, str(SAMPLES))

from composition import ACTIVITIES as COMPOSITION_ACTIVITIES  # noqa: E402
from composition import WORKFLOWS as COMPOSITION_WORKFLOWS  # noqa: E402
from composition import Order as ShopOrder  # noqa: E402
from composition import Subscription, checkout, subscription  # noqa: E402
from order import ACTIVITIES, WORKFLOWS, Order, order_workflow  # noqa: E402
from payment_uncertain import Payment, activities, payment, workflows  # noqa: E402
from shopping_cart import ACTIVITIES as CART_ACTIVITIES  # noqa: E402
from shopping_cart import WORKFLOWS as CART_WORKFLOWS  # noqa: E402
from shopping_cart import shopping_cart  # noqa: E402

from azync_flow.embedded import resolve_dsn  # noqa: E402
from azync_flow.errors import UpdateRejectedError  # noqa: E402
from azync_flow.store import Config  # noqa: E402
from azync_flow.store.postgres import open_store  # noqa: E402
from azync_flow.testing import (  # noqa: E402
    MovableClock,
    WorkflowEnvironment,
    drop_schema,
    unique_schema,
)

Scenario = Callable[[WorkflowEnvironment], Awaitable[Any]]


async def order_shipped(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(order_workflow, Order("o-1", "sku-42", 2, 4999, "4242"))
    await env.sleep(timedelta(minutes=5))  # a human approves within the hour
    await handle.signal("approve", {"by": "recorder"}, message_id="ok-o-1")
    await handle.result(timeout=30)
    return handle


async def order_declined(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(order_workflow, Order("o-2", "sku-42", 1, 999, "0000-2"))
    await handle.result(timeout=30)
    return handle


async def order_approval_timed_out(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(order_workflow, Order("o-3", "sku-7", 1, 500, "4242"))
    await handle.result(timeout=30)  # the hour-long approval wait is skipped
    return handle


async def payment_charged(env: WorkflowEnvironment) -> Any:
    conn = await env.store.pool.acquire()
    try:
        await conn.execute(
            f'CREATE TABLE "{env.store.schema}".provider_charges '
            "(idempotency_key text PRIMARY KEY, charge_id text, amount_cents int)"
        )
    finally:
        await env.store.pool.release(conn)
    handle = await env.client.start(payment, Payment("p-1", 1200, "4242"))
    await handle.result(timeout=30)
    return handle


async def checkout_shipped(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(checkout, ShopOrder("o-7", 2500, "4242", "1 Main St"))
    await handle.result(timeout=30)
    return handle


async def cart_checked_out(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(shopping_cart, "c-1")
    await handle.update("add_item", "sku-42", 2, update_id="line-1")
    with contextlib.suppress(UpdateRejectedError):  # rejected: leaves no event
        await handle.update("add_item", "sku-9", 99, update_id="line-2")
    await handle.update("add_item", "sku-7", 1, update_id="line-3")
    await handle.query("summary")  # leaves no event either
    await handle.signal("checkout", message_id="checkout-c-1")
    await handle.result(timeout=30)
    return handle


async def checkout_declined(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(checkout, ShopOrder("o-8", 2500, "4111000000000000", "x"))
    await handle.result(timeout=30)
    return handle


async def _child(env: WorkflowEnvironment, name: str) -> Any:
    handle = await checkout_shipped(env)
    kids = await env.store.list_child_workflows(handle.id)
    return env.client.get_handle(next(k.id for k in kids if k.name == name))


async def order_payment_charged(env: WorkflowEnvironment) -> Any:
    return await _child(env, "order_payment")


async def order_shipping_picked_up(env: WorkflowEnvironment) -> Any:
    return await _child(env, "order_shipping")


async def subscription_ended(env: WorkflowEnvironment) -> Any:
    handle = await env.client.start(subscription, Subscription("c-1", periods=2))
    await handle.result(timeout=30)
    return handle


class FirstRun:
    """A handle whose recorded history is its first run's (continued as new)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def recorded_history(self) -> Any:
        return await self.handle.recorded_history(run_no=1)


async def subscription_renewed(env: WorkflowEnvironment) -> Any:
    return FirstRun(await subscription_ended(env))


RECORDINGS: dict[str, tuple[list[Any], list[Any], Scenario]] = {
    "order-shipped": (WORKFLOWS, ACTIVITIES, order_shipped),
    "order-declined": (WORKFLOWS, ACTIVITIES, order_declined),
    "order-approval-timed-out": (WORKFLOWS, ACTIVITIES, order_approval_timed_out),
    "payment-charged": (workflows, activities, payment_charged),
    "checkout-shipped": (COMPOSITION_WORKFLOWS, COMPOSITION_ACTIVITIES, checkout_shipped),
    "checkout-declined": (COMPOSITION_WORKFLOWS, COMPOSITION_ACTIVITIES, checkout_declined),
    "order-payment-charged": (
        COMPOSITION_WORKFLOWS,
        COMPOSITION_ACTIVITIES,
        order_payment_charged,
    ),
    "order-shipping-picked-up": (
        COMPOSITION_WORKFLOWS,
        COMPOSITION_ACTIVITIES,
        order_shipping_picked_up,
    ),
    "subscription-renewed": (COMPOSITION_WORKFLOWS, COMPOSITION_ACTIVITIES, subscription_renewed),
    "subscription-ended": (COMPOSITION_WORKFLOWS, COMPOSITION_ACTIVITIES, subscription_ended),
    "cart-checked-out": (CART_WORKFLOWS, CART_ACTIVITIES, cart_checked_out),
}


async def record(name: str) -> Path:
    wfs, acts, scenario = RECORDINGS[name]
    dsn = os.environ.get("AZYNC_TEST_DSN") or resolve_dsn()[0]
    schema = unique_schema("record")
    clock = MovableClock()
    store = await open_store(dsn, Config(schema=schema), clock=clock)
    os.environ.update(AZYNC_DSN=dsn, AZYNC_SCHEMA=schema)  # the payment provider's table
    try:
        async with await WorkflowEnvironment(store, clock).start(wfs, acts) as env:
            handle = await scenario(env)
            recorded = await handle.recorded_history()
    finally:
        await store.close()
        await drop_schema(dsn, schema)
    path = HERE / f"{name}.json"
    path.write_bytes(recorded.to_json() + b"\n")
    return path


async def main() -> None:
    for name in sys.argv[1:] or RECORDINGS:
        print(await record(name))


if __name__ == "__main__":
    asyncio.run(main())
