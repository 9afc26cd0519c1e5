"""Transactional subscribers in the event store (``TransactionalEventConsumer``):
the handler's SQL and the delivery's ack commit in one transaction, fenced by
the delivery's lease; the handler's SQL runs with the database's default
search_path."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.events import PublishParams, Subscriber, TransactionalEventConsumer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Job, Source
from azync_flow.testing import MovableClock
from tests.store.helpers import LEASE, lease, row


@pytest.fixture
async def projection(store: PostgresStore) -> AsyncIterator[str]:
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.orders (event_id uuid, total int)")
    yield f"{name}.orders"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


async def delivery(store: PostgresStore) -> Job:
    await store.register_subscriber(Subscriber(name="projector", event_type="order.placed"))
    await store.publish(PublishParams(id=uuid.uuid4(), type="order.placed", payload=b"{}"))
    (job,) = await lease(store, "projector", source=Source.EVENT)
    assert job.lease_token is not None
    return job


async def projected(store: PostgresStore, table: str) -> list[tuple[uuid.UUID, int]]:
    return [tuple(r) for r in await store.pool.fetch(f"SELECT * FROM {table}")]


async def test_the_store_offers_transactional_deliveries(store: PostgresStore) -> None:
    assert isinstance(store, TransactionalEventConsumer)


async def test_handler_writes_and_ack_commit_together(
    store: PostgresStore, projection: str
) -> None:
    job = await delivery(store)
    assert job.lease_token is not None
    async with store.delivery_transaction(job.id, job.lease_token) as tx:
        await tx.connection.execute(f"INSERT INTO {projection} VALUES ($1, 5)", job.event_id)
        await tx.ack()
    assert await projected(store, projection) == [(job.event_id, 5)]
    assert (await row(store, job.id))["state"] == "succeeded"


async def test_leaving_without_the_ack_rolls_the_handler_writes_back(
    store: PostgresStore, projection: str
) -> None:
    job = await delivery(store)
    assert job.lease_token is not None

    async def handler_raises() -> None:
        async with store.delivery_transaction(job.id, job.lease_token) as tx:  # type: ignore[arg-type]
            await tx.connection.execute(f"INSERT INTO {projection} VALUES ($1, 5)", job.event_id)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await handler_raises()
    assert await projected(store, projection) == []
    assert (await row(store, job.id))["state"] == "active"


async def test_a_stale_token_opens_no_delivery_transaction(store: PostgresStore) -> None:
    job = await delivery(store)
    entered = False
    with pytest.raises(NotFoundError):
        async with store.delivery_transaction(job.id, uuid.uuid4()):
            entered = True
    assert not entered


async def test_a_delivery_whose_lease_was_taken_meanwhile_writes_nothing(
    store: PostgresStore, clock: MovableClock, projection: str
) -> None:
    clock.advance(timedelta(0))
    job = await delivery(store)
    assert job.lease_token is not None
    async with store.delivery_transaction(job.id, job.lease_token) as stale:
        await stale.connection.execute(f"INSERT INTO {projection} VALUES ($1, 1)", job.event_id)
        clock.advance(LEASE + timedelta(seconds=1))
        await store.reap_expired(Source.EVENT)
        (again,) = await lease(store, "projector", source=Source.EVENT)
        assert again.lease_token is not None
        async with store.delivery_transaction(again.id, again.lease_token) as fresh:
            await fresh.connection.execute(f"INSERT INTO {projection} VALUES ($1, 2)", job.event_id)
            await fresh.ack()
        with pytest.raises(NotFoundError):
            await stale.ack()
    assert await projected(store, projection) == [(job.event_id, 2)]


async def test_handler_sql_runs_with_the_database_default_search_path(
    store: PostgresStore, pg_dsn: str
) -> None:
    plain = await asyncpg.connect(pg_dsn)
    try:
        expected = await plain.fetchval("SHOW search_path")
    finally:
        await plain.close()
    job = await delivery(store)
    assert job.lease_token is not None
    async with store.delivery_transaction(job.id, job.lease_token, isolation="serializable") as tx:
        seen = await tx.connection.fetchval("SHOW search_path")
        level = await tx.connection.fetchval("SHOW transaction_isolation")
        await tx.ack()
    assert (seen, level) == (expected, "serializable")
