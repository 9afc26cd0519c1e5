"""Transactional subscribers on a real Worker and PostgreSQL: the handler's SQL
on ``ctx.connection`` commits with the delivery's ack, a failed attempt's writes
are rolled back before its retry, a serialization failure re-runs the handler
in the same attempt, and misuse is refused with a clear error."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from azync_flow import attach_subscribers
from azync_flow.client import Client
from azync_flow.events import EventContext, subscriber
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker

RUNS: list[str] = []
TABLE: list[str] = []
OTHER: list[Any] = []


@subscriber("order.placed", name="projector", transactional=True)
async def projector(payload: dict[str, int], ctx: EventContext) -> None:
    RUNS.append(str(payload["n"]))
    await ctx.connection.execute(
        f"INSERT INTO {TABLE[0]} (event_id, total) VALUES ($1, $2)", ctx.event_id, payload["n"]
    )


@subscriber(
    "order.flaky",
    name="flaky_projector",
    transactional=True,
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10)),
)
async def flaky_projector(payload: dict[str, int], ctx: EventContext) -> None:
    RUNS.append("flaky")
    await ctx.connection.execute(f"INSERT INTO {TABLE[0]} VALUES ($1, 1)", ctx.event_id)
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails after its insert")


@subscriber("order.conflict", name="conflicting", transactional=True, isolation="repeatable_read")
async def conflicting(payload: dict[str, int], ctx: EventContext) -> None:
    RUNS.append("conflict")
    await ctx.connection.fetchval(f"SELECT total FROM {TABLE[0]}_sums WHERE id = 1")
    if RUNS.count("conflict") == 1:  # another transaction commits after our snapshot
        await OTHER[0].execute(f"UPDATE {TABLE[0]}_sums SET total = total + 100 WHERE id = 1")
    await ctx.connection.execute(f"UPDATE {TABLE[0]}_sums SET total = total + 1 WHERE id = 1")
    await ctx.connection.execute(f"INSERT INTO {TABLE[0]} VALUES ($1, 1)", ctx.event_id)


@subscriber("order.plain", name="plain_projector")
async def plain(payload: dict[str, int], ctx: EventContext) -> None:
    RUNS.append("plain")
    ctx.connection  # noqa: B018 - raises: not transactional


@pytest.fixture
async def table(store: PostgresStore) -> AsyncIterator[str]:
    RUNS.clear()
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.orders (event_id uuid, total int)")
    await store.pool.execute(f"CREATE TABLE {name}.orders_sums (id int PRIMARY KEY, total int)")
    await store.pool.execute(f"INSERT INTO {name}.orders_sums VALUES (1, 0)")
    TABLE[:] = [f"{name}.orders"]
    yield TABLE[0]
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


async def make_worker(store: PostgresStore) -> Worker:
    """A worker running the subscribers, registered (events published from now
    on are delivered to them)."""
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=50),
        handle_signals=False,
    )
    await attach_subscribers(worker, [projector, flaky_projector, conflicting, plain]).register()
    return worker


async def settled(store: PostgresStore, kind: str, n: int, state: str = "succeeded") -> None:
    async with asyncio.timeout(30):
        while (  # noqa: ASYNC110
            await store.pool.fetchval(
                "SELECT count(*) FROM azync_jobs WHERE kind = $1 AND state = $2", kind, state
            )
            < n
        ):
            await asyncio.sleep(0.05)


async def rows(store: PostgresStore, table: str) -> list[tuple[uuid.UUID, int]]:
    return [tuple(r) for r in await store.pool.fetch(f"SELECT * FROM {table} ORDER BY total")]


async def test_each_delivery_writes_its_projection_once_with_its_ack(
    store: PostgresStore, table: str
) -> None:
    worker = await make_worker(store)
    client = Client(store)
    async with worker:
        ids = [await client.publish("order.placed", {"n": n}) for n in range(20)]
        await settled(store, "projector", 20)
    assert sorted(r[0] for r in await rows(store, table)) == sorted(ids)
    assert sorted(RUNS, key=int) == [str(n) for n in range(20)]


async def test_a_failed_delivery_attempt_rolls_its_writes_back_before_the_retry(
    store: PostgresStore, table: str
) -> None:
    worker = await make_worker(store)
    async with worker:
        event_id = await Client(store).publish("order.flaky", {"n": 1})
        await settled(store, "flaky_projector", 1)
    assert RUNS == ["flaky", "flaky"]
    assert await rows(store, table) == [(event_id, 1)]
    attempt = await store.pool.fetchval(
        "SELECT attempt FROM azync_jobs WHERE kind = 'flaky_projector'"
    )
    assert attempt == 2


async def test_a_serialization_failure_reruns_the_handler_in_the_same_attempt(
    store: PostgresStore, table: str, pg_dsn: str
) -> None:
    OTHER.append(await asyncpg.connect(pg_dsn))
    try:
        async with await make_worker(store):
            event_id = await Client(store).publish("order.conflict", {"n": 1})
            await settled(store, "conflicting", 1)
    finally:
        await OTHER.pop().close()
    assert RUNS == ["conflict", "conflict"]
    assert await rows(store, table) == [(event_id, 1)]
    assert await store.pool.fetchval(f"SELECT total FROM {table}_sums") == 101
    attempt = await store.pool.fetchval("SELECT attempt FROM azync_jobs WHERE kind = 'conflicting'")
    assert attempt == 1


async def test_a_plain_subscriber_has_no_connection_to_write_on(
    store: PostgresStore, table: str
) -> None:
    async with await make_worker(store):
        await Client(store).publish("order.plain", {"n": 1})
        async with asyncio.timeout(30):
            while not (  # noqa: ASYNC110
                error := await store.pool.fetchval(
                    "SELECT last_error FROM azync_jobs WHERE kind = 'plain_projector'"
                )
            ):
                await asyncio.sleep(0.05)
    assert "not transactional" in error, RUNS


def test_a_transactional_subscriber_must_take_the_context(store: PostgresStore) -> None:
    @subscriber("x", name="no_ctx", transactional=True)
    async def no_ctx(payload: dict[str, int]) -> None:
        return None

    worker = Worker(store, handle_signals=False)
    with pytest.raises(TypeError, match=r"ctx\.connection"):
        attach_subscribers(worker, [no_ctx])


def test_an_unknown_isolation_level_is_refused() -> None:
    with pytest.raises(ValueError, match="isolation"):
        subscriber("x", name="y", transactional=True, isolation="chaos")  # type: ignore[arg-type]
