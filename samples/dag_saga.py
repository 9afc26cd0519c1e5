"""Order-fulfilment saga on azync_flow DAGs.

reserve -> charge -> wait for the warehouse signal -> ship, each step with a
compensation. The saga runs twice: once on the happy path, once with the
carrier down so ``ship`` dies and the compensations run in reverse order.

Run: ``python samples/dag_saga.py`` (uses ``$AZYNC_DSN`` or an embedded PostgreSQL).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from azync_flow.dag import DAG, DAGClient, DAGRunner, RetryPolicy, TaskContext, run_until_settled
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import open_store
from azync_flow.store.queue import JobState

compensations: list[str] = []
carrier_up = True


def build() -> DAG:
    saga = DAG("order_fulfilment", on_failure="cancel")

    async def release_stock(ctx: TaskContext) -> None:
        compensations.append(f"release stock ({ctx.task_results['reserve'].value['hold']})")

    async def refund(ctx: TaskContext) -> None:
        compensations.append(f"refund {ctx.task_results['charge'].value['charge_id']}")

    async def cancel_pick(ctx: TaskContext) -> None:
        compensations.append(f"cancel warehouse pick {ctx.task_results['warehouse'].value}")

    async def recall_parcel(ctx: TaskContext) -> None:
        compensations.append("recall parcel")

    @saga.task(compensate=release_stock)
    async def reserve(ctx: TaskContext) -> dict[str, str]:
        return {"hold": f"hold-{ctx.payload['order']}"}

    @saga.task(after=[reserve], compensate=refund, max_attempts=3)
    async def charge(ctx: TaskContext) -> dict[str, object]:
        return {"charge_id": f"ch-{ctx.payload['order']}", "amount": ctx.payload["amount"]}

    saga.signal("warehouse", after=[charge], compensate=cancel_pick)

    @saga.task(after=["warehouse"], compensate=recall_parcel, max_attempts=2)
    async def ship(ctx: TaskContext) -> dict[str, str]:
        if not carrier_up:
            raise ConnectionError("carrier API unreachable")
        return {"tracking": f"TRK-{ctx.payload['order']}"}

    return saga


async def warehouse(client: DAGClient, store: object, run_id: uuid.UUID) -> None:
    """The warehouse system: reports 'packed' once the payment went through."""
    while True:
        tasks = {t.task_key: t for t in await client.tasks(run_id)}
        if tasks["charge"].state == JobState.SUCCEEDED:
            break
        await asyncio.sleep(0.01)
    receipt = await client.signal(run_id, "warehouse", "bin-42", message_id=f"wh-{run_id}")
    again = await client.signal(run_id, "warehouse", "bin-42", message_id=f"wh-{run_id}")
    print(f"  warehouse signal: delivered={receipt.delivered}, ", end="")
    print(f"repeat deduplicated={again.deduplicated}")


async def run_once(
    client: DAGClient, runner: DAGRunner, store: object, saga: DAG, order: int
) -> None:
    compensations.clear()
    run = await client.run(
        saga, {"order": order, "amount": 99}, idempotency_key=f"order-{order}-{uuid.uuid4()}"
    )
    signaller = asyncio.create_task(warehouse(client, store, run.id))
    view = await run_until_settled(store, runner, run.id, timeout=60)
    await signaller
    print(
        f"  run {run.id}: {view.state}"
        + (f" ({view.failure_reason})" if view.failure_reason else "")
    )
    tasks = await client.tasks(run.id)
    order = list(saga.tasks)
    tasks.sort(
        key=lambda t: (
            t.task_key.startswith("comp:"),
            order.index(t.task_key) if t.task_key in order else 0,
            t.completed_at or t.enqueued_at,
        )
    )
    for t in tasks:
        extra = t.result.decode() if t.result else t.last_error
        print(f"    {t.task_key:<16} {t.state:<10} {extra}")
    if compensations:
        print("  compensation order: " + " -> ".join(compensations))
    expected = DAGState.SUCCEEDED if carrier_up else DAGState.FAILED
    assert view.state == expected, view


async def main() -> None:
    global carrier_up
    dsn, where = resolve_dsn()
    print(f"using {where}")
    store = await open_store(dsn, Config(schema="azync_sample_dag_saga"))
    try:
        saga = build()
        client = DAGClient(store)
        runner = DAGRunner(
            store,
            [saga],
            retry=RetryPolicy(initial_interval=timedelta(milliseconds=50), jitter=0.0),
        )
        print("happy path:")
        await run_once(client, runner, store, saga, 1001)
        carrier_up = False
        print("carrier down (ship dies, saga compensates):")
        await run_once(client, runner, store, saga, 1002)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
