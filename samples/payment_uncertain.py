"""A payment whose charge step must never run twice (docs/uncertain.md).

    python samples/payment_uncertain.py        # AZYNC_DSN, or an embedded server

Stages, each printed:

1. A ``payment`` run starts. A worker process (``azync-flow worker``) takes the
   charge, the fake provider records the charge, and the worker is SIGKILLed
   before it can report — the outcome is now unknown to the runtime.
2. The lease expires; the reaper parks the charge as *uncertain* (it is
   ``idempotent=False``, so it is never re-run blindly) and the run is
   suspended. ``list_uncertain`` shows why and since when.
3. The charge's reconcile hook looks the charge up at the provider by the
   execution key and answers ``Reconciled.completed(charge_id)``.
4. The run resumes and completes with that charge id; the provider holds ONE
   charge.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import asyncpg
import msgspec

from azync_flow import Reconciled, Worker, WorkflowContext, activity, attach_workflows, workflow
from azync_flow.activity import current_activity
from azync_flow.client import Client
from azync_flow.runtime.uncertain import Reconciler, uncertain_event
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.workflow import Registry

LEASE_SECONDS = 1.0
HERE = Path(__file__).resolve().parent


class Payment(msgspec.Struct):
    order_id: str
    amount_cents: int
    card: str


async def _provider() -> asyncpg.Connection:
    """The fake payment provider: a table keyed by execution key."""
    schema = os.environ["AZYNC_SCHEMA"]
    return await asyncpg.connect(os.environ["AZYNC_DSN"], server_settings={"search_path": schema})


async def find_charge(payment: Payment, execution_key: str) -> Reconciled:
    """Reconcile hook: ask the provider whether this execution key was charged."""
    conn = await _provider()
    try:
        charge_id = await conn.fetchval(
            "SELECT charge_id FROM provider_charges WHERE idempotency_key = $1", execution_key
        )
    finally:
        await conn.close()
    if charge_id is None:
        return Reconciled.retry(note="the provider has no charge under this key")
    return Reconciled.completed(charge_id, note=f"provider shows {charge_id}")


@activity(name="charge_card", idempotent=False, reconcile=find_charge)
async def charge_card(payment: Payment) -> str:
    info = current_activity()
    assert info is not None
    key = f"{info.workflow_id}/{info.seq}"  # the execution key: our idempotency key
    conn = await _provider()
    try:
        charge_id = f"ch_{payment.order_id}_{payment.amount_cents}"
        await conn.execute(
            "INSERT INTO provider_charges (idempotency_key, charge_id, amount_cents)"
            " VALUES ($1, $2, $3)",
            key,
            charge_id,
            payment.amount_cents,
        )
    finally:
        await conn.close()
    if os.environ.get("SAMPLE_KILL_AFTER_CHARGE") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies before reporting
    return charge_id


@workflow(name="payment")
async def payment(ctx: WorkflowContext, p: Payment) -> dict[str, str]:
    charge_id = await charge_card(p)
    return {"order": p.order_id, "charge": charge_id}


workflows = [payment]
activities = [charge_card]


async def demo() -> None:
    from azync_flow.embedded import resolve_dsn

    dsn, where = resolve_dsn()
    schema = unique_schema("payment")
    store = await open_store(dsn, Config(schema=schema))
    os.environ.update(AZYNC_DSN=dsn, AZYNC_SCHEMA=schema)
    print(f"using {where}, schema {schema}")
    try:
        await store.pool.execute(
            "CREATE TABLE provider_charges (idempotency_key text PRIMARY KEY,"
            " charge_id text NOT NULL, amount_cents int NOT NULL)"
        )
        client = Client(store)

        # 1. start, and let a worker process die right after the provider charged
        handle = await client.start(payment, Payment("A-1001", 4999, "4242"))
        print(f"[1] started payment {handle.id}")
        env = {
            **os.environ,
            "SAMPLE_KILL_AFTER_CHARGE": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "azync_flow.cli", "worker", "payment_uncertain",
            "--lease", str(LEASE_SECONDS), "--log-level", "ERROR", env=env,
        )  # fmt: skip
        code = await asyncio.wait_for(worker.wait(), 60)
        charges = await store.pool.fetchval("SELECT count(*) FROM provider_charges")
        print(f"[1] worker process {worker.pid} killed mid-charge (exit {code});"
              f" provider charges: {charges}")  # fmt: skip

        # 2. the lease expires; the reaper parks the charge and suspends the run
        await asyncio.sleep(LEASE_SECONDS + 0.2)
        parked = await store.reap_uncertain_operations(uncertain_event)
        view = await handle.describe()
        print(f"[2] reaper parked {len(parked)} operation(s); run is {view.state}")
        for op in await client.list_uncertain():
            print(f"[2] uncertain: {op.activity} of {op.workflow_name} {op.workflow_id}")
            print(f"    input {op.input.decode()}, since {op.since:%H:%M:%S}")
            print(f"    reason: {op.reason}")

        # 3. from code: the reconcile hook asks the provider by execution key
        registry = Registry(workflows, activities)
        reconciler = Reconciler(store, registry)
        decided = await reconciler.run_once()
        print(f"[3] reconcile hook decided {decided} operation(s): {reconciler.outcomes}")

        # 4. the run resumes and completes — without a second charge
        finisher = Worker(store, handle_signals=False)
        attach_workflows(finisher, registry)
        await finisher.run_until_idle()
        result = await handle.result(timeout=30)
        charges = await store.pool.fetchval("SELECT count(*) FROM provider_charges")
        print(f"[4] run {(await handle.describe()).state}: {result}; provider charges: {charges}")
        history = [type(e.event).__name__ for e in await handle.history()]
        print(f"[4] history: {' -> '.join(history)}")
        assert charges == 1, "charged twice!"
    finally:
        await store.close()
        await drop_schema(dsn, schema)


if __name__ == "__main__":
    asyncio.run(demo())
