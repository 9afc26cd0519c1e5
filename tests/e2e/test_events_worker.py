"""The event ledger as applications use it: publish (alone and inside the
caller's transaction), subscribers on a real worker with retries and dead
letters, replay, retention, follow-up events, and a workflow started from an event."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from azync_flow import WorkflowContext, activity, attach_subscribers, attach_workflows, workflow
from azync_flow.activity import current_activity
from azync_flow.client import Client
from azync_flow.errors import NotFoundError, PayloadEncodeError, StoreUnavailableError
from azync_flow.events import EventContext, register_subscribers, subscriber
from azync_flow.events import _worker as events_worker
from azync_flow.retry import RetryPolicy
from azync_flow.store.events import EventFilter, ReplayFilter, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import SpanCapture, parent_id
from azync_flow.worker import Worker

FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}
NO_WAIT = RetryPolicy(initial_interval=timedelta(0), jitter=0.0)


class Order(msgspec.Struct):
    id: str
    cents: int


async def deliveries(store: PostgresStore, event_id: uuid.UUID) -> list[asyncpg.Record]:
    return await store.pool.fetch(
        "SELECT kind, state, attempt, last_error, replay FROM azync_jobs"
        " WHERE event_id = $1 ORDER BY enqueued_at, id",
        event_id,
    )


async def run(worker: Worker) -> None:
    async with asyncio.timeout(30):
        await worker.run_until_idle()


@pytest.fixture
async def own_conn(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of the application's own, with the default search path."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def test_outbox_event_exists_if_and_only_if_the_callers_transaction_commits(
    store: PostgresStore, schema: str, own_conn: asyncpg.Connection
) -> None:
    shipped: list[tuple[Order, str, str]] = []

    @subscriber("order.placed", name="shipper")
    async def ship(order: Order, ctx: EventContext) -> None:
        shipped.append((order, ctx.key, ctx.event_type))

    worker = Worker(store, **FAST)
    binding = attach_subscribers(worker, [ship])
    await binding.register()
    client = Client(store)
    await own_conn.execute(f'CREATE TABLE "{schema}".orders (id text PRIMARY KEY)')

    tx = own_conn.transaction()
    await tx.start()
    await own_conn.execute(f'INSERT INTO "{schema}".orders VALUES ($1)', "o-1")
    rolled = await client.publish("order.placed", Order("o-1", 100), key="o-1", conn=own_conn)
    await tx.rollback()  # the application's transaction fails
    async with own_conn.transaction():
        await own_conn.execute(f'INSERT INTO "{schema}".orders VALUES ($1)', "o-2")
        kept = await client.publish("order.placed", Order("o-2", 250), key="o-2", conn=own_conn)
        # not visible to anyone before the commit
        with pytest.raises(NotFoundError):
            await store.get_event(kept)

    with pytest.raises(NotFoundError):
        await store.get_event(rolled)
    assert (await store.get_event(kept)).aggregate_id == "o-2"
    await run(worker)
    assert shipped == [(Order("o-2", 250), "o-2", "order.placed")]
    assert [r["state"] for r in await deliveries(store, kept)] == ["succeeded"]


async def test_failing_subscriber_is_retried_then_dead_lettered(store: PostgresStore) -> None:
    attempts: list[int] = []

    @subscriber(
        "card.charged",
        name="ledger",
        retry=RetryPolicy(initial_interval=timedelta(0), jitter=0.0, maximum_attempts=3),
    )
    async def book(payload: dict[str, int], ctx: EventContext) -> None:
        attempts.append(ctx.attempt)
        raise ConnectionError(f"ledger down at attempt {ctx.attempt}")

    worker = Worker(store, **FAST)
    await attach_subscribers(worker, [book]).register()
    event_id = await Client(store).publish("card.charged", {"cents": 5})
    await run(worker)

    assert attempts == [1, 2, 3]
    (d,) = await deliveries(store, event_id)
    assert (d["state"], d["attempt"]) == ("dead", 3)
    assert d["last_error"] == "ConnectionError: ledger down at attempt 3"


async def test_replay_redelivers_the_same_event_flagged_as_replay(store: PostgresStore) -> None:
    seen: list[tuple[uuid.UUID, bool, dict[str, Any]]] = []

    @subscriber("user.created", name="welcome")
    async def welcome(payload: dict[str, Any], ctx: EventContext) -> None:
        seen.append((ctx.event_id, ctx.replay, payload))

    worker = Worker(store, **FAST)
    await attach_subscribers(worker, [welcome]).register()
    event_id = await Client(store).publish("user.created", {"name": "ada"})
    await run(worker)
    assert await store.replay(ReplayFilter(event_type="user.created")) == 1
    await run(worker)

    assert seen == [(event_id, False, {"name": "ada"}), (event_id, True, {"name": "ada"})]
    assert [(r["state"], r["replay"]) for r in await deliveries(store, event_id)] == [
        ("succeeded", False),
        ("succeeded", True),
    ]


async def test_retention_removes_old_delivered_events_and_keeps_undelivered_ones(
    store: PostgresStore, clock: MovableClock
) -> None:
    @subscriber("a", name="fast")
    async def fast(payload: Any) -> None:
        return None

    worker = Worker(store, **FAST)
    binding = attach_subscribers(worker, [fast], keep=timedelta(days=7))
    await binding.register()
    # a subscriber no worker runs: its delivery stays pending
    await store.register_subscriber(Subscriber(name="offline", event_type="b"))
    client = Client(store)
    delivered = await client.publish("a", 1)
    waiting = await client.publish("b", 2)
    await run(worker)

    clock.advance(timedelta(days=8))
    recent = await client.publish("a", 3)
    await run(worker)
    await binding.retain()

    with pytest.raises(NotFoundError):
        await store.get_event(delivered)
    assert (await store.get_event(waiting)).deliveries == 1
    assert (await store.get_event(recent)).deliveries == 1


async def test_activity_publishes_once_although_its_attempt_is_retried(
    store: PostgresStore,
) -> None:
    received: list[dict[str, str]] = []

    @activity(name="ship", retry=NO_WAIT)
    async def ship(order_id: str) -> str:
        info = current_activity()
        assert info is not None
        await info.publish("order.shipped", {"order": order_id}, key=order_id)
        if info.attempt == 1:
            raise ConnectionError("carrier timed out after the event was published")
        return "shipped"

    @workflow(name="fulfil")
    async def fulfil(ctx: WorkflowContext, order_id: str) -> str:
        return await ship(order_id)

    @subscriber("order.shipped", name="mailer")
    async def mail(payload: dict[str, str]) -> None:
        received.append(payload)

    worker = Worker(store, **FAST)
    attach_workflows(worker, [fulfil], [ship])
    await attach_subscribers(worker, [mail]).register()
    client = Client(store)
    handle = await client.start(fulfil, "o-9")
    await run(worker)

    assert await handle.result(timeout=5) == "shipped"
    assert received == [{"order": "o-9"}]
    events, total = await store.list_events(EventFilter(type="order.shipped"), 0, 10)
    assert total == 1
    assert events[0].aggregate_id == "o-9"


async def test_subscriber_publishes_a_follow_up_event(store: PostgresStore) -> None:
    got: list[str] = []

    @subscriber("order.placed", name="packer")
    async def pack(order: Order, ctx: EventContext) -> None:
        await ctx.publish("order.packed", {"id": order.id}, key=order.id)

    @subscriber("order.packed", name="notifier")
    async def notify(payload: dict[str, str], ctx: EventContext) -> None:
        got.append(ctx.key)

    worker = Worker(store, **FAST)
    await attach_subscribers(worker, [pack, notify]).register()
    await Client(store).publish("order.placed", Order("o-3", 1), key="o-3")
    await run(worker)
    assert got == ["o-3"]


async def test_publish_refuses_bad_input_with_product_errors(store: PostgresStore) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match="event_type"):
        await client.publish("bad\x00type", {})
    with pytest.raises(ValueError, match="event_type"):
        await client.publish("", {})
    with pytest.raises(ValueError, match="key"):
        await client.publish("ok", {}, key="k\x00")
    with pytest.raises(PayloadEncodeError):
        await client.publish("ok", {"x": math.nan})
    _, total = await store.list_events(EventFilter(), 0, 10)
    assert total == 0


# --- the recipe: a workflow started by an event ------------------------------------


@workflow(name="order-flow")
async def order_flow(ctx: WorkflowContext, order: Order) -> str:
    return f"done {order.id}"


@subscriber("order.placed", name="order-flow-starter")
async def start_order_flow(order: Order, ctx: EventContext) -> None:
    # The event id is the execution id: a duplicate delivery finds it.
    await ctx.client.start(order_flow, order, id=ctx.event_id, idempotency_key=str(ctx.event_id))


async def test_workflow_started_from_an_event_runs_once_despite_a_duplicate_delivery(
    store: PostgresStore,
) -> None:
    worker = Worker(store, **FAST)
    attach_workflows(worker, [order_flow], [])
    await attach_subscribers(worker, [start_order_flow]).register()
    client = Client(store)
    event_id = await client.publish("order.placed", Order("o-5", 10), key="o-5")
    await run(worker)
    # the same event delivered again (an operator's replay)
    assert await store.replay(ReplayFilter(event_id=event_id)) == 1
    await run(worker)

    assert [r["state"] for r in await deliveries(store, event_id)] == ["succeeded"] * 2
    page = await client.list(order_flow)
    assert [e.id for e in page.executions] == [event_id]
    assert await client.get_handle(event_id, order_flow).result(timeout=5) == "done o-5"


async def test_register_subscribers_before_any_worker_so_early_events_are_delivered(
    store: PostgresStore,
) -> None:
    got: list[int] = []

    @subscriber("tick", name="counter", max_attempts=2)
    async def count(n: int) -> None:
        got.append(n)

    await register_subscribers(store, [count])
    views = await store.list_subscriber_views("tick")
    assert [(v.subscriber, v.event_type, v.max_attempts) for v in views] == [("counter", "tick", 2)]
    await Client(store).publish("tick", 1)
    worker = Worker(store, **FAST)
    attach_subscribers(worker, [count])
    await run(worker)
    assert got == [1]


async def test_traced_delivery_attempts_are_spans_under_the_publishers_span(
    store: PostgresStore,
) -> None:
    capture = SpanCapture()

    @subscriber("invoice.sent", name="bookkeeper", retry=NO_WAIT)
    async def book(payload: dict[str, int], ctx: EventContext) -> None:
        if ctx.attempt == 1:
            raise ConnectionError("ledger busy")

    worker = Worker(store, **FAST)
    await attach_subscribers(
        worker, [book], trace=True, tracer_provider=capture.provider
    ).register()
    with capture.provider.get_tracer("app").start_as_current_span("POST /invoice") as request:
        await Client(store).publish("invoice.sent", {"cents": 100})
    await run(worker)

    spans = capture.named("job bookkeeper")
    assert [s.attributes["azync.outcome"] for s in spans] == ["retried", "succeeded"]
    for s in spans:
        assert parent_id(s) == request.get_span_context().span_id


async def test_subscribers_attached_in_two_calls_both_run_and_a_duplicate_name_is_refused(
    store: PostgresStore,
) -> None:
    got: list[str] = []

    @subscriber("a", name="one")
    async def one(payload: Any) -> None:
        got.append("one")

    @subscriber("a", name="two")
    async def two(payload: Any) -> None:
        got.append("two")

    worker = Worker(store, **FAST)
    first = attach_subscribers(worker, [one])
    second = attach_subscribers(worker, [two])
    with pytest.raises(ValueError, match="already registered"):
        attach_subscribers(worker, [one])
    await first.register()
    await second.register()
    await Client(store).publish("a", None)
    await run(worker)
    assert sorted(got) == ["one", "two"]


async def test_publish_on_a_connection_without_a_transaction_or_on_a_pool_is_refused(
    store: PostgresStore, own_conn: asyncpg.Connection, pg_dsn: str
) -> None:
    client = Client(store)
    with pytest.raises(ValueError, match="no open transaction"):
        await client.publish("order.placed", {}, conn=own_conn)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1)
    try:
        with pytest.raises(TypeError, match="inside your transaction, not Pool"):
            await client.publish("order.placed", {}, conn=pool)
    finally:
        await pool.close()
    _, total = await store.list_events(EventFilter(), 0, 10)
    assert total == 0


async def test_publish_on_a_closed_connection_raises_store_unavailable(
    store: PostgresStore, pg_dsn: str
) -> None:
    conn = await asyncpg.connect(pg_dsn)
    tx = conn.transaction()
    await tx.start()
    # the server ends the application's session (a restart, an admin, a timeout)
    await store.pool.execute("SELECT pg_terminate_backend($1)", conn.get_server_pid())
    with pytest.raises(StoreUnavailableError):
        await Client(store).publish("order.placed", {}, conn=conn)
    conn.terminate()


async def test_one_retention_pass_removes_a_backlog_larger_than_one_batch(
    store: PostgresStore, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_worker, "RETAIN_BATCH", 2)
    worker = Worker(store, **FAST)
    binding = attach_subscribers(worker, [], keep=timedelta(days=1))
    client = Client(store)
    old = [await client.publish("nobody.listens", n) for n in range(5)]
    clock.advance(timedelta(days=2))
    await binding.retain()
    _, total = await store.list_events(EventFilter(), 0, 10)
    assert total == 0, old


async def test_a_delivery_whose_worker_died_is_reaped_and_delivered_again(
    store: PostgresStore, clock: MovableClock
) -> None:
    got: list[int] = []

    @subscriber("stock.low", name="reorder")
    async def reorder(payload: int, ctx: EventContext) -> None:
        got.append(ctx.attempt)

    worker = Worker(store, **FAST)
    await attach_subscribers(worker, [reorder]).register()
    event_id = await Client(store).publish("stock.low", 3)
    # another worker leased the delivery and died: its lease runs out
    [lost] = await store.dequeue_batch(
        Source.EVENT, DequeueParams(kind="reorder", limit=1, lease=timedelta(seconds=5))
    )
    assert lost.event_id == event_id
    clock.advance(timedelta(minutes=1))
    await run(worker)

    assert got == [1]  # the lost attempt was given back, not counted
    [d] = await deliveries(store, event_id)
    assert d["state"] == "succeeded"


async def test_the_client_lists_the_subscribers_a_worker_registered(
    store: PostgresStore,
) -> None:
    @subscriber("invoice.paid", name="receipts", retry=RetryPolicy(maximum_attempts=4))
    async def receipts(payload: dict[str, str], ctx: EventContext) -> None:
        pass

    @subscriber("invoice.paid", name="ledger", ordering="key")
    async def ledger(payload: dict[str, str], ctx: EventContext) -> None:
        pass

    client = Client(store)
    assert await client.subscribers("invoice.paid") == []
    worker = Worker(store, **FAST)
    await attach_subscribers(worker, [receipts, ledger]).register()
    assert await client.subscribers("invoice.paid") == [
        Subscriber(
            name="ledger",
            event_type="invoice.paid",
            max_attempts=worker.max_attempts,  # no budget of its own: the worker's
            ordered=True,
        ),
        Subscriber(name="receipts", event_type="invoice.paid", max_attempts=4),
    ]
    with pytest.raises(ValueError, match="event_type must not be empty"):
        await client.subscribers("")
