"""Driver errors become product errors at the pool: a session the server ends is
StoreUnavailableError (reported once, then "reconnected"), a missing table is
SchemaNotMigratedError; errors of the statement itself stay what they are."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from azync_flow import SchemaNotMigratedError, StoreUnavailableError
from azync_flow.store.postgres import PostgresStore


async def _use_a_session_the_server_ends(store: PostgresStore) -> None:
    async with store.pool.acquire() as conn:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        assert await store.pool.fetchval("SELECT pg_terminate_backend($1)", pid)
        await conn.fetchval("SELECT 1")


async def test_a_session_the_server_ends_is_store_unavailable_and_reported_once(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="azync_flow.store")
    for _ in range(3):  # three outages: each reported once, each followed by a reconnect
        with pytest.raises(StoreUnavailableError) as info:
            await _use_a_session_the_server_ends(store)
        assert type(info.value.__cause__).__module__.startswith("asyncpg")  # kept as the cause
        assert await store.pool.fetchval("SELECT 2") == 2
    messages = [(r.levelname, r.getMessage().split(":")[0]) for r in caplog.records]
    assert [m for m in messages if m[0] == "WARNING"] == [
        ("WARNING", "database unavailable, retrying")
    ] * 3
    assert sum("database reconnected after" in m[1] for m in messages) == 3
    for warning in [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]:
        # what happened in the product's words first, the driver's text as the cause
        what, cause = warning.removeprefix("database unavailable, retrying: ").split(" (cause: ")
        assert what.startswith(("the server ended the session", "the connection to the server"))
        assert cause.split(":")[0].endswith("Error")  # e.g. InternalClientError: cannot switch
        assert "Error" not in what
    assert store.availability.outages == 3


async def test_a_missing_table_is_schema_not_migrated_with_the_hint(store: PostgresStore) -> None:
    with pytest.raises(SchemaNotMigratedError, match="run `azync-flow migrate` first"):
        await store.pool.fetchval("SELECT count(*) FROM azync_no_such_table")
    with pytest.raises(SchemaNotMigratedError):
        async with store.pool.acquire() as conn:
            await conn.execute("DELETE FROM azync_no_such_table")


async def test_errors_of_the_statement_itself_are_not_translated(store: PostgresStore) -> None:
    with pytest.raises(asyncpg.PostgresSyntaxError):
        await store.pool.execute("SELEC 1")
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with store.pool.acquire() as conn:
            await conn.fetchval("SELECT 1 / 0")
    assert store.availability.outages == 0
