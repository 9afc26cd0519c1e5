"""What the console tests look at: real workflows, a DAG saga, a schedule, a
queue job, an event subscriber, all run by one real worker against one schema,
and the runs they leave (a waiting order with retried activities, a finished
one with a child, a continued-as-new chain, an uncertain operation, a failed
saga with compensations, a dead job, an event with its deliveries, and a run
whose input and signal names hold markup)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import msgspec
from opentelemetry.sdk.trace import TracerProvider

from azync_flow import (
    Client,
    RetryPolicy,
    WorkflowContext,
    activity,
    attach_dags,
    attach_subscribers,
    attach_workflows,
    workflow,
)
from azync_flow._decisions import reconcile_verdict
from azync_flow.activity import Reconciled
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import Uncertain
from azync_flow.events import EventContext, subscriber
from azync_flow.schedules import EnqueueJob, Interval, ScheduleClient, ScheduleSpec
from azync_flow.store.queue import EnqueueParams, JobState, Source
from azync_flow.worker import JobContext, Worker

#: Input and signal names a hostile user could give: nothing of them may run.
XSS_NOTE = "<script>window.__xss = 1</script>"
XSS_SIGNAL = "<img src=x onerror=window.__xss=2>"

#: Attempts made per order id by the flaky charge (it fails twice, then succeeds).
CHARGES: dict[str, int] = {}
#: The dead letter's handler succeeds once a test sets this.
MAIL_OK = {"ok": False}


@activity(name="reserve_stock")
async def reserve_stock(order_id: str) -> str:
    return f"rsv-{order_id}"


@activity(
    name="charge_card",
    retry=RetryPolicy(maximum_attempts=4, initial_interval=timedelta(milliseconds=250), jitter=0),
)
async def charge_card(order_id: str) -> str:
    CHARGES[order_id] = CHARGES.get(order_id, 0) + 1
    if CHARGES[order_id] < 3:
        raise ConnectionError(f"bank busy (try {CHARGES[order_id]})")
    return f"ch-{order_id}"


#: What the payment provider's lookup answers while it is down.
PSP_DOWN = "PSP lookup down"


async def look_up_payment(order_id: str, execution_key: str) -> Reconciled:
    """The reconcile hook: the provider cannot be asked, so a person decides."""
    return Reconciled.unknown(PSP_DOWN)


@activity(name="settle_payment", idempotent=False, reconcile=look_up_payment)
async def settle_payment(order_id: str) -> str:
    raise Uncertain("the provider timed out after the request was sent")


@workflow(name="ship_parcel")
async def ship_parcel(ctx: WorkflowContext, order_id: str) -> str:
    await ctx.sleep(timedelta(milliseconds=100))
    return f"TRK-{order_id}"


@workflow(name="order")
async def order(ctx: WorkflowContext, inp: dict[str, Any]) -> dict[str, Any]:
    """Reserve, charge (two failed attempts first), wait for ``inp["signal"]``
    (default ``approve``, an hour at most), then ship in a child. The
    ``address`` update changes where it ships meanwhile."""
    where = {"address": inp.get("address", "")}

    @ctx.update("address")
    async def change_address(address: str) -> str:
        await ctx.sleep(timedelta(milliseconds=50))
        where["address"] = address
        return address

    await reserve_stock(inp["id"])
    charge = await charge_card(inp["id"])
    approval = await ctx.wait_signal(inp.get("signal", "approve"), timeout=timedelta(hours=1))
    tracking = await ctx.execute_child(ship_parcel, inp["id"])
    return {"charge": charge, "tracking": tracking, "approved_by": approval, **where}


@workflow(name="payment")
async def payment(ctx: WorkflowContext, order_id: str) -> str:
    """Parks uncertain on its first settle: a person decides."""
    result: str = await settle_payment(order_id)
    return result


@workflow(name="billing")
async def billing(ctx: WorkflowContext, period: int) -> str:
    """Continues as new each period until the third."""
    await ctx.sleep(timedelta(milliseconds=50))
    if period < 3:
        ctx.continue_as_new(period + 1)
    return f"billed {period} periods"


def saga() -> DAG:
    """reserve -> charge -> ship; ship always dies, so the run compensates."""
    dag = DAG("fulfilment", on_failure="cancel")

    async def release(ctx: TaskContext) -> None:
        return None

    async def refund(ctx: TaskContext) -> None:
        return None

    @dag.task(compensate=release)
    async def reserve(ctx: TaskContext) -> str:
        return "hold-1"

    @dag.task(after=[reserve], compensate=refund)
    async def charge(ctx: TaskContext) -> str:
        return "ch-1"

    @dag.task(after=[charge], max_attempts=1)
    async def ship(ctx: TaskContext) -> str:
        raise ConnectionError("carrier API unreachable")

    return dag


@subscriber("order.placed", name="mailer")
async def mailer(payload: Any, ctx: EventContext) -> None:
    return None


@subscriber("order.placed", name="ledger")
async def ledger(payload: Any, ctx: EventContext) -> None:
    return None


def make_worker(store: Any) -> Worker:
    """A real worker running everything above."""
    worker = Worker(
        store,
        concurrency=16,
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        handle_signals=False,
    )
    attach_workflows(
        worker,
        [order, payment, billing, ship_parcel],
        [reserve_stock, charge_card, settle_payment],
    )
    attach_dags(
        worker,
        [saga()],
        tick_interval=timedelta(milliseconds=100),
        retry=RetryPolicy(initial_interval=timedelta(milliseconds=50), jitter=0),
    )
    attach_subscribers(worker, [mailer, ledger])

    @worker.register("mail.send", max_attempts=1)
    async def send_mail(payload: Any, ctx: JobContext) -> None:
        if not MAIL_OK["ok"]:
            raise ConnectionError("SMTP refused the message")

    return worker


async def wait_for(check: Callable[[], Awaitable[Any]], what: str, within: float = 30.0) -> Any:
    """Poll ``check`` until it returns something truthy (or raise after ``within`` s).

    Only for what announces itself by no event: a run parked on a signal or
    suspended, a dead job, a DAG run's end, a hook's verdict, a ledger row. A
    run's end is awaited with ``WorkflowHandle.result()`` (a NOTIFY wakes it)."""
    async with asyncio.timeout(within):
        while True:
            got = await check()
            if got:
                return got
            await asyncio.sleep(0.05)
    raise AssertionError(what)  # pragma: no cover - the timeout raises first


async def state_of(store: Any, wid: uuid.UUID) -> str:
    return str((await Client(store).get_handle(wid).describe()).state)


@dataclass
class World:
    """The ids of what :func:`seed` started."""

    waiting: uuid.UUID  # an order waiting for "approve" after a retried charge and an update
    done: uuid.UUID  # an approved order, finished with its child
    xss: uuid.UUID  # an order whose input and awaited signal hold markup
    uncertain: uuid.UUID  # a payment suspended on an uncertain operation
    billing: uuid.UUID  # three runs (continue-as-new)
    dag: uuid.UUID  # a failed saga with two compensations
    dead_job: uuid.UUID  # a queue job out of attempts
    event: uuid.UUID  # an event with two deliveries
    schedule: str  # an hourly schedule in Europe/Paris


async def seed(store: Any) -> World:
    """Start everything and wait until each run is where the tests expect it."""
    client = Client(store)
    traced = Client(store, tracer_provider=TracerProvider())  # records the run's trace id
    waiting = (await traced.start("order", {"id": "A-1", "sku": "mug", "qty": 2})).id
    done = (await client.start("order", {"id": "A-2"}, idempotency_key="order-A-2")).id
    xss = (await client.start("order", {"id": "X-1", "note": XSS_NOTE, "signal": XSS_SIGNAL})).id
    uncertain = (await client.start("payment", "P-1")).id
    billing_id = (await client.start("billing", 1)).id
    run = await DAGClient(store).run(saga(), {"order": 1})
    job = uuid.uuid4()
    await store.enqueue(
        EnqueueParams(id=job, kind="mail.send", payload=msgspec.json.encode({"to": "ann"}))
    )
    event = await client.publish("order.placed", {"id": "A-1"}, key="A-1")
    schedules = ScheduleClient(store)
    await schedules.create(
        "nightly-report",
        ScheduleSpec(cron=("30 1 * * *",), tz="Europe/Paris"),
        EnqueueJob.of("report.build", {"kind": "nightly"}),  # no handler: fires stay queued
        note="the nightly report",
    )
    await schedules.create(
        "hourly-ping",
        ScheduleSpec(intervals=(Interval(every=timedelta(hours=1)),)),
        EnqueueJob.of("ping", None),
    )

    async def parked(wid: uuid.UUID) -> bool:
        return bool((await client.get_handle(wid).describe()).awaited_signals)

    await client.get_handle(done).signal("approve", "ann")  # kept until it waits for it
    await wait_for(lambda: parked(waiting), "order A-1 waits for approve")
    await client.get_handle(waiting).update("address", "2 Side Street", timeout=30)
    await wait_for(lambda: parked(xss), "order X-1 waits for its signal")
    await client.get_handle(done).result(timeout=30)  # order A-2 finishes
    await wait_for(lambda: _is(store, uncertain, "suspended"), "payment parks uncertain")
    (op,) = await client.list_uncertain(workflow_id=uncertain)
    await wait_for(lambda: reconcile_verdict(store, op.operation_id, op.attempt),
                   "the reconcile hook records its verdict")  # fmt: skip
    await client.get_handle(billing_id).result(timeout=30)  # billing runs three periods
    await wait_for(lambda: _dag_done(store, run.id), "the saga compensates")
    await wait_for(lambda: _dead(store, job), "the mail job dies")
    return World(waiting, done, xss, uncertain, billing_id, run.id, job, event,
                 "nightly-report")  # fmt: skip


async def _is(store: Any, wid: uuid.UUID, state: str) -> bool:
    return await state_of(store, wid) == state


async def _dag_done(store: Any, run_id: uuid.UUID) -> bool:
    return str((await DAGClient(store).get(run_id)).state) == "failed"


async def _dead(store: Any, job: uuid.UUID) -> bool:
    return (await store.get_job(Source.QUEUE, job)).state == JobState.DEAD
