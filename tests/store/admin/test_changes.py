"""Contract clauses of ChangeNotifier.Changes (coarse hints: wakes + RESET)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from azync_flow.store import Config
from azync_flow.store.admin import Change, ChangeEntity
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.postgres.admin import ChangeSubscription
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock, drop_schema, unique_schema
from tests.store.helpers import enqueue_and_lease, job


@pytest.fixture
async def cstore(pg_dsn: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, notify_channel=f"c_{schema}"), clock=clock)
    try:
        yield s
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)


async def _next(sub: ChangeSubscription, within: float = 5.0) -> Change:
    async with asyncio.timeout(within):
        return await anext(sub)


async def test_changes_first_delivery_is_a_reset(cstore: PostgresStore) -> None:
    sub = await cstore.changes()
    assert sub is not None
    async with sub:
        first = await _next(sub)
        assert first.entity == ChangeEntity.RESET
        assert first.at is not None


async def test_changes_forward_wakes_as_job_partition_hints(cstore: PostgresStore) -> None:
    sub = await cstore.changes()
    assert sub is not None
    async with sub:
        assert (await _next(sub)).entity == ChangeEntity.RESET
        await cstore.enqueue(job("alpha"))
        hint = await _next(sub)
        while hint.entity == ChangeEntity.RESET:  # the statistics probe may race the hint
            hint = await _next(sub)
        assert (hint.entity, hint.source, hint.kind, hint.state) == (
            ChangeEntity.JOB,
            Source.QUEUE,
            "alpha",
            "pending",
        )


async def test_changes_announce_a_silent_change_with_a_reset(
    cstore: PostgresStore, pg_dsn: str
) -> None:
    """A settle sends no NOTIFY; the statistics probe still announces it.

    The change is made on a short-lived session so its statistics are
    published at once (a busy pooled session may hold them up to ~10 s).
    """
    j = await enqueue_and_lease(cstore)
    sub = await cstore.changes()
    assert sub is not None
    async with sub:
        assert (await _next(sub)).entity == ChangeEntity.RESET
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(
                f'UPDATE "{cstore.schema}".azync_jobs SET state = $2 WHERE id = $1',
                j.id,
                "succeeded",
            )
        finally:
            await conn.close()
        assert (await _next(sub)).entity == ChangeEntity.RESET


async def test_changes_is_none_when_poll_only(pg_dsn: str) -> None:
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, poll_only=True))
    try:
        assert await s.changes() is None
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)
