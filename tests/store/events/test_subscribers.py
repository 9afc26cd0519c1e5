"""Contract clauses of ``EventConsumer.subscribers`` (``Subscribers``): the
registrations of one event type, ordered by name, exactly those a publish of
that type fans out to."""

from __future__ import annotations

import uuid

import pytest

from azync_flow.store.events import PublishParams, Subscriber
from azync_flow.store.postgres import PostgresStore


async def test_subscribers_of_a_type_are_ordered_by_name(store: PostgresStore) -> None:
    for name in ("c", "a", "b"):
        await store.register_subscriber(Subscriber(name=name, event_type="order.placed"))
    assert [s.name for s in await store.subscribers("order.placed")] == ["a", "b", "c"]


async def test_subscribers_are_those_of_that_exact_type_only(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="billing", event_type="order.placed"))
    await store.register_subscriber(Subscriber(name="audit", event_type="order.placed.v2"))
    await store.register_subscriber(Subscriber(name="audit", event_type="order"))
    (only,) = await store.subscribers("order.placed")
    assert (only.name, only.event_type) == ("billing", "order.placed")


async def test_subscribers_carry_the_registration_as_last_upserted(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="b", event_type="t", max_attempts=3))
    await store.register_subscriber(
        Subscriber(name="b", event_type="t", max_attempts=5, ordered=True)
    )
    assert await store.subscribers("t") == [
        Subscriber(name="b", event_type="t", max_attempts=5, ordered=True)
    ]


async def test_subscribers_are_whom_a_publish_of_the_type_reaches(store: PostgresStore) -> None:
    for name in ("mailer", "shipper"):
        await store.register_subscriber(Subscriber(name=name, event_type="order.placed"))
    assert await store.delete_subscriber("mailer", "order.placed") == 1
    names = [s.name for s in await store.subscribers("order.placed")]
    published = PublishParams(id=uuid.uuid4(), type="order.placed", payload=b"{}")
    assert await store.publish(published) == len(names) == 1
    kinds = await store.pool.fetch("SELECT kind FROM azync_jobs WHERE event_id = $1", published.id)
    assert [r["kind"] for r in kinds] == names == ["shipper"]


async def test_a_type_nobody_subscribes_to_has_no_subscribers(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="b", event_type="t"))
    assert await store.subscribers("u") == []


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ("", ValueError, "event_type must not be empty"),
        ("a\x00b", ValueError, "must not contain NUL"),
        ("t" * 256, ValueError, "256 characters long"),
        (7, TypeError, "event_type must be a str"),
    ],
)
async def test_subscribers_of_a_type_no_event_can_have_are_refused(
    store: PostgresStore, bad: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await store.subscribers(bad)  # type: ignore[arg-type]
