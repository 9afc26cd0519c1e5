"""Worker app for the uncertain kill tests (run with ``azync-flow worker``).

``charge`` is a non-idempotent activity that writes to a fake payment provider
(a Postgres table keyed by execution key). With ``KILL_AT`` set, the worker
SIGKILLs itself during the FIRST attempt at that point:

* ``before``       — leased, before the provider call;
* ``mid``          — inside the provider's open transaction (the write is lost);
* ``after_write``  — the provider committed the charge, the report was never sent.

Every entry into the activity is logged in ``provider_calls`` first.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import asyncpg
import msgspec

from azync_flow import Reconciled, WorkflowContext, activity, workflow
from azync_flow.activity import current_activity
from azync_flow.retry import RetryPolicy

DSN = os.environ.get("AZYNC_DSN", "")
SCHEMA = os.environ.get("AZYNC_SCHEMA", "public")
KILL_AT = os.environ.get("KILL_AT", "")

PROVIDER_DDL = """
CREATE TABLE IF NOT EXISTS provider_charges (
    execution_key text PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL);
CREATE TABLE IF NOT EXISTS provider_calls (
    id bigserial PRIMARY KEY, execution_key text NOT NULL, attempt int NOT NULL);
"""


class Order(msgspec.Struct):
    id: str
    amount: int
    reconcile: bool = True


async def _conn() -> asyncpg.Connection:
    return await asyncpg.connect(DSN, server_settings={"search_path": SCHEMA})


def _die(point: str, attempt: int) -> None:
    if point == KILL_AT and attempt == 1:
        os.kill(os.getpid(), signal.SIGKILL)


async def _charge(order: Order) -> str:
    info = current_activity()
    assert info is not None
    key = f"{info.workflow_id}/{info.seq}"
    conn = await _conn()
    try:
        await conn.execute(
            "INSERT INTO provider_calls (execution_key, attempt) VALUES ($1, $2)",
            key,
            info.attempt,
        )
        _die("before", info.attempt)
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO provider_charges VALUES ($1, $2, $3)", key, order.id, order.amount
            )
            _die("mid", info.attempt)
        _die("after_write", info.attempt)
    finally:
        await conn.close()
    return f"ch-{order.id}"


async def lookup_charge(order: Order, execution_key: str) -> Reconciled:
    """Reconcile hook: ask the provider by execution key."""
    conn = await _conn()
    try:
        row = await conn.fetchrow(
            "SELECT order_id FROM provider_charges WHERE execution_key = $1", execution_key
        )
    finally:
        await conn.close()
    if row is None:
        return Reconciled.retry(note="provider has no charge for this key")
    return Reconciled.completed(f"ch-{row['order_id']}", note="provider shows the charge")


@activity(name="charge", idempotent=False, reconcile=lookup_charge)
async def charge(order: Order) -> str:
    return await _charge(order)


@activity(name="charge_manual", idempotent=False)
async def charge_manual(order: Order) -> str:
    return await _charge(order)


@activity(
    name="reserve_stock",
    retry=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(milliseconds=10)),
)
async def reserve_stock(order: Order) -> str:
    info = current_activity()
    assert info is not None
    conn = await _conn()
    try:
        await conn.execute(
            "INSERT INTO provider_calls (execution_key, attempt) VALUES ($1, $2)",
            f"reserve:{info.workflow_id}/{info.seq}",
            info.attempt,
        )
    finally:
        await conn.close()
    _die("reserve", info.attempt)
    return f"res-{order.id}"


@workflow(name="pay")
async def pay(ctx: WorkflowContext, order: Order) -> str:
    reservation = await reserve_stock(order)
    receipt = await (charge(order) if order.reconcile else charge_manual(order))
    return f"{reservation}+{receipt}"


workflows = [pay]
activities = [charge, charge_manual, reserve_stock]
