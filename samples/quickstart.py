"""Quickstart: run the order workflow on a real worker and print its history.

    python samples/quickstart.py              # approve the order -> shipped
    python samples/quickstart.py --decline    # the card is declined -> stock released
    python samples/quickstart.py --no-approve # approval times out -> refund + release

Uses ``$AZYNC_DSN`` when set, else an embedded PostgreSQL whose data directory
is printed and kept, so a second run sees the first run's executions.
``$AZYNC_SCHEMA`` picks the Postgres schema (default ``public``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msgspec
from order import Order, Receipt, make_worker, order_workflow

from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.workflows import WorkflowExecutionView, WorkflowState


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--decline", action="store_true", help="use a card that is declined")
    mode.add_argument(
        "--no-approve", action="store_true", help="never send `approve`: the approval times out"
    )
    parser.add_argument(
        "--approval-timeout", type=float, default=None, help="seconds to wait for `approve`"
    )
    return parser.parse_args()


def outcome(view: WorkflowExecutionView) -> str:
    """A finished order's receipt status, else the execution state (another
    application's workflow of the same name may share the schema: its result
    is no receipt)."""
    if view.state == WorkflowState.SUCCEEDED and view.result:
        try:
            return msgspec.json.decode(view.result, type=Receipt).status
        except msgspec.ValidationError:
            return "succeeded (not a sample receipt)"
    return str(view.state)


async def earlier_executions(client: Client) -> Counter[str]:
    """Executions of the ``order`` workflow already in this database, by outcome."""
    states: Counter[str] = Counter()
    page = await client.list(order_workflow, limit=500)
    while True:
        states.update(outcome(view) for view in page.executions)
        if page.next_cursor is None:
            return states
        page = await client.list(order_workflow, limit=500, cursor=page.next_cursor)


async def print_history(client: Client, workflow_id: uuid.UUID) -> None:
    rows = await client.store.list_history(workflow_id)
    entries = await client.get_handle(workflow_id).history()
    t0 = rows[0].created_at if rows else None
    print(f"\n  {'seq':>3}  {'+ms':>6}  {'event':<20}  detail")
    print(f"  {'-' * 3}  {'-' * 6}  {'-' * 20}  {'-' * 44}")
    for row, entry in zip(rows, entries, strict=True):
        ms = (row.created_at - t0).total_seconds() * 1000 if t0 else 0.0
        name = type(entry.event).__name__
        detail = entry.event.describe()
        if detail.startswith(name):
            detail = detail[len(name) :].strip("()")
        if len(detail) > 60:
            detail = detail[:57] + "..."
        print(f"  {entry.seq:>3}  {ms:>6.0f}  {name:<20}  {detail}")


async def main() -> None:
    args = parse_args()
    dsn, where = resolve_dsn()
    print(f"database:  {where}")
    store = await open_store(dsn, Config(schema=os.environ.get("AZYNC_SCHEMA", "")))
    client = Client(store)
    try:
        before = await earlier_executions(client)
        total = before.total()
        summary = ", ".join(f"{n} {state}" for state, n in sorted(before.items())) or "none"
        print(f"earlier executions of workflow '{order_workflow.name}': {total} ({summary})")

        timeout = args.approval_timeout or (3.0 if args.no_approve else 60.0)
        card = "0000000000000002" if args.decline else "4242424242424242"
        order = Order(f"o-{uuid.uuid4().hex[:6]}", "sku-42", 2, 4999, card, timeout)
        async with make_worker(store):
            started = time.perf_counter()
            handle = await client.start(order_workflow, order, idempotency_key=order.id)
            print(f"started:   order {order.id} as execution {handle.id}")
            if not (args.decline or args.no_approve):
                await asyncio.sleep(0.2)  # a human approves a little later
                await handle.signal("approve", {"by": "quickstart"}, message_id=f"ok-{order.id}")
                print("signalled: approve")
            elif args.no_approve:
                print(f"waiting:   no approval will come; timeout {timeout:g}s")
            receipt = await handle.result(timeout=timeout + 60)
            elapsed = time.perf_counter() - started
        print(f"result:    {receipt.status} ({elapsed:.2f}s)")
        for field in ("charge_id", "tracking", "approved_by"):
            if value := getattr(receipt, field):
                print(f"           {field} = {value}")
        await print_history(client, handle.id)
    finally:
        await client.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
