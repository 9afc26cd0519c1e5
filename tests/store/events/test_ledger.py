"""Contract clauses of the event ledger: publish/fan-out, subscribers, admin
reads, replay, retention, and event delivery leasing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.events import EventFilter, PublishParams, ReplayFilter, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock
from tests.store.helpers import lease, row

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def event(type: str = "order.placed", **kw: object) -> PublishParams:
    kw.setdefault("payload", b'{"order":1}')
    return PublishParams(id=uuid.uuid4(), type=type, **kw)  # type: ignore[arg-type]


async def _subscribe(store: PostgresStore, *names: str, type: str = "order.placed") -> None:
    for name in names:
        await store.register_subscriber(Subscriber(name=name, event_type=type))


async def test_publish_fans_out_one_delivery_per_registered_subscriber(
    store: PostgresStore,
) -> None:
    await _subscribe(store, "billing", "shipping")
    await _subscribe(store, "audit", type="order.cancelled")
    p = event()
    assert await store.publish(p) == 2
    rows = await store.pool.fetch(
        "SELECT kind, state, payload, event_id, replay FROM azync_jobs ORDER BY kind"
    )
    assert [(r["kind"], r["state"], r["payload"], r["event_id"], r["replay"]) for r in rows] == [
        ("billing", "pending", None, p.id, False),
        ("shipping", "pending", None, p.id, False),
    ]
    await _subscribe(store, "late")  # registered after the publish: no delivery
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE kind='late'") == 0


async def test_publish_without_subscribers_keeps_an_undispatched_event(
    store: PostgresStore,
) -> None:
    p = event()
    assert await store.publish(p) == 0
    got = await store.get_event(p.id)
    assert (got.deliveries, got.dispatched_at) == (0, None)


async def test_publish_same_id_twice_is_a_conflict(store: PostgresStore) -> None:
    p = event()
    await store.publish(p)
    with pytest.raises(ConflictError):
        await store.publish(p)


async def test_dequeue_event_delivery_rehydrates_the_ledger_record(store: PostgresStore) -> None:
    await _subscribe(store, "billing")
    body = b'{"s":"a\\u0000b","emoji":"\\ud83d\\ude00","z":1,"a":2}'
    p = event(
        payload=body,
        aggregate_type="order",
        aggregate_id="o-1",
        version=7,
        occurred_at=T0,
        meta={"tenant": "t1"},
    )
    await store.publish(p)
    (j,) = await lease(store, "billing", source=Source.EVENT)
    assert (j.source, j.kind, j.event_id, j.payload) == (Source.EVENT, "billing", p.id, None)
    assert j.event is not None
    ev = j.event
    assert (ev.id, ev.type, ev.aggregate_type, ev.aggregate_id, ev.version) == (
        p.id,
        "order.placed",
        "order",
        "o-1",
        7,
    )
    assert (ev.occurred_at, ev.payload, ev.meta) == (T0, body, {"tenant": "t1"})
    await store.ack(j.id, j.lease_token)
    # a queue lease never carries an event
    assert await lease(store, "billing") == []


async def test_publish_tx_commits_and_rolls_back_with_callers_transaction(
    store: PostgresStore,
) -> None:
    await _subscribe(store, "billing")
    kept, dropped = event(), event()
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        assert await store.publish_tx(conn, dropped) == 1
        await tx.rollback()
        tx = conn.transaction()
        await tx.start()
        assert await store.publish_tx(conn, kept) == 1
        assert await lease(store, "billing", source=Source.EVENT) == []
        await tx.commit()
    (j,) = await lease(store, "billing", source=Source.EVENT)
    assert j.event_id == kept.id
    with pytest.raises(NotFoundError):
        await store.get_event(dropped.id)


async def test_register_subscriber_upserts_max_attempts(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="b", event_type="t", max_attempts=3))
    await store.register_subscriber(Subscriber(name="b", event_type="t", max_attempts=5))
    (view,) = await store.list_subscriber_views("t")
    assert (view.subscriber, view.event_type, view.max_attempts) == ("b", "t", 5)
    await store.publish(event("t"))
    (j,) = await lease(store, "b", source=Source.EVENT, default_max_attempts=25)
    assert j.max_attempts == 5  # a subscriber's budget is explicit, not the runtime default


async def test_delete_subscriber_by_type_or_every_type_keeps_deliveries(
    store: PostgresStore,
) -> None:
    await _subscribe(store, "billing")
    await _subscribe(store, "billing", type="t2")
    await _subscribe(store, "billing", type="t3")
    await store.publish(event())
    assert await store.delete_subscriber("billing", "t2") == 1
    assert await store.delete_subscriber("billing", "") == 2
    assert await store.delete_subscriber("billing", "") == 0
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 1


async def test_list_subscriber_views_ordered_by_type_then_name(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    await _subscribe(store, "b", "a", type="y")
    await _subscribe(store, "c", type="x")
    views = await store.list_subscriber_views("")
    assert [(v.event_type, v.subscriber) for v in views] == [("x", "c"), ("y", "a"), ("y", "b")]
    assert views[0].created_at == views[0].updated_at == T0
    assert [v.subscriber for v in await store.list_subscriber_views("y")] == ["a", "b"]


async def test_list_events_filters_newest_first_with_total(store: PostgresStore) -> None:
    await _subscribe(store, "billing")
    ids = []
    for i in range(4):
        p = event("order.placed" if i % 2 else "other", occurred_at=T0 + timedelta(hours=i))
        await store.publish(p)
        ids.append(p.id)
    rows, total = await store.list_events(EventFilter(), 0, 10)
    assert total == 4
    assert [r.id for r in rows] == ids[::-1]
    page, total = await store.list_events(EventFilter(), 1, 2)
    assert ([r.id for r in page], total) == ([ids[2], ids[1]], 4)
    typed, total = await store.list_events(EventFilter(type="order.placed"), 0, 10)
    assert ([r.id for r in typed], total) == ([ids[3], ids[1]], 2)
    assert all(r.deliveries == 1 and r.dispatched_at == r.occurred_at for r in typed)
    undispatched, _ = await store.list_events(EventFilter(undispatched=True), 0, 10)
    assert [r.id for r in undispatched] == [ids[2], ids[0]]
    dispatched, _ = await store.list_events(EventFilter(undispatched=False), 0, 10)
    assert [r.id for r in dispatched] == [ids[3], ids[1]]
    window = EventFilter(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3))
    assert [r.id for r in (await store.list_events(window, 0, 10))[0]] == [ids[2], ids[1]]
    assert await store.list_events(EventFilter(), 10, 10) == ([], 4)


async def test_get_event_returns_row_or_not_found(store: PostgresStore) -> None:
    await _subscribe(store, "a", "b")
    p = event(meta={"k": "v"}, occurred_at=T0)
    await store.publish(p)
    got = await store.get_event(p.id)
    assert (got.type, got.meta, got.payload, got.deliveries) == (
        "order.placed",
        {"k": "v"},
        p.payload,
        2,
    )
    assert got.dispatched_at == T0
    with pytest.raises(NotFoundError):
        await store.get_event(uuid.uuid4())


async def test_ops_stats_summarises_the_ledger(store: PostgresStore, clock: MovableClock) -> None:
    now = clock.advance(timedelta(0))
    await _subscribe(store, "billing")
    await store.publish(event(occurred_at=now - timedelta(hours=1)))
    await store.publish(event("other", occurred_at=now - timedelta(hours=2)))
    await store.publish(event("third", occurred_at=now - timedelta(days=2)))
    stats = await store.ops_stats()
    assert (stats.undispatched, stats.total_24h, stats.types_24h, stats.subscribers) == (2, 2, 2, 1)


async def test_replay_creates_fresh_replay_deliveries_for_matching_events(
    store: PostgresStore,
) -> None:
    await _subscribe(store, "billing", "shipping")
    old, mid, new = (event(occurred_at=T0 + timedelta(days=d)) for d in (0, 1, 2))
    for p in (old, mid, new):
        await store.publish(p)
    await store.publish(event("other", occurred_at=T0))
    assert await store.replay(ReplayFilter(subscriber="billing", event_id=mid.id)) == 1
    assert await store.replay(ReplayFilter(since=T0 + timedelta(days=1))) == 4  # mid, new x 2
    assert await store.replay(ReplayFilter(until=T0 + timedelta(days=1))) == 2  # old x 2
    assert await store.replay(ReplayFilter(event_type="order.placed", limit=1)) == 2  # old only
    assert await store.replay(ReplayFilter(event_type="nobody-listens")) == 0
    replays = await store.pool.fetch(
        "SELECT kind, event_id FROM azync_jobs WHERE replay AND state = 'pending'"
    )
    assert len(replays) == 9
    assert sum(1 for r in replays if r["event_id"] == old.id) == 4
    jobs = await lease(store, "billing", source=Source.EVENT, limit=100)
    replayed = [j for j in jobs if j.replay]
    assert len(replayed) == 5
    assert all(j.event is not None and j.event.id == j.event_id for j in replayed)


async def test_retain_deletes_only_events_whose_deliveries_are_all_terminal(
    store: PostgresStore,
) -> None:
    await _subscribe(store, "billing")
    done, busy, young, bare = (
        event(occurred_at=T0),
        event(occurred_at=T0),
        event(occurred_at=T0 + timedelta(days=10)),
        event("nobody", occurred_at=T0),
    )
    for p in (done, busy, young, bare):
        await store.publish(p)
    first, second, third = await lease(store, "billing", source=Source.EVENT)
    by_event = {j.event_id: j for j in (first, second, third)}
    await store.ack(by_event[done.id].id, by_event[done.id].lease_token)
    await store.ack(by_event[young.id].id, by_event[young.id].lease_token)
    cutoff = T0 + timedelta(days=1)
    assert await store.retain(cutoff, 0) == 0
    assert await store.retain(cutoff, 1) == 1
    assert await store.retain(cutoff, 100) == 1
    left = {r["id"] for r in await store.pool.fetch("SELECT id FROM azync_events")}
    assert left == {busy.id, young.id}
    assert (
        await store.pool.fetchval("SELECT count(*) FROM azync_jobs WHERE event_id = $1", done.id)
        == 0
    )  # its terminal delivery went with it
    assert (await row(store, by_event[busy.id].id))["state"] == "active"
