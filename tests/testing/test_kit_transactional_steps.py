"""A ``@transaction`` step under the testing kit, set up as docs/testing.md
says: the application's tables in a schema of the test's own, in the store's
database, written by the step through the store's connections."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from azync_flow import transaction, workflow
from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import WorkflowEnvironment
from azync_flow.workflow import WorkflowContext


@transaction(name="kit_debit")
async def kit_debit(conn: asyncpg.Connection, app: str, account: str, cents: int) -> int:
    balance: int = await conn.fetchval(
        f"UPDATE {app}.accounts SET cents = cents - $2 WHERE id = $1 RETURNING cents",
        account,
        cents,
    )
    return balance


@transaction(name="kit_where_am_i")
async def kit_where_am_i(conn: asyncpg.Connection) -> str:
    path: str = await conn.fetchval("SHOW search_path")
    return path


@workflow(name="kit_pay")
async def kit_pay(ctx: WorkflowContext, app_and_account: list[str]) -> int:
    app, account = app_and_account
    return await kit_debit(app, account, 500)


@workflow(name="kit_search_path")
async def kit_search_path(ctx: WorkflowContext) -> str:
    return await kit_where_am_i()


@pytest.fixture
async def app(azync_store: PostgresStore) -> AsyncIterator[str]:
    name = f"app_{uuid.uuid4().hex[:12]}"
    await azync_store.pool.execute(f"CREATE SCHEMA {name}")
    await azync_store.pool.execute(f"CREATE TABLE {name}.accounts (id text PRIMARY KEY, cents int)")
    await azync_store.pool.execute(f"INSERT INTO {name}.accounts VALUES ('a', 1000)")
    yield name
    await azync_store.pool.execute(f"DROP SCHEMA {name} CASCADE")


async def test_a_step_writes_the_tests_own_tables_in_the_store_database(
    workflow_env: WorkflowEnvironment, azync_store: PostgresStore, app: str
) -> None:
    env = await workflow_env.start([kit_pay], [kit_debit])
    handle = await env.client.start(kit_pay, [app, "a"])
    assert await handle.result(timeout=10) == 500
    assert await azync_store.pool.fetchval(f"SELECT cents FROM {app}.accounts") == 500


async def test_the_step_sql_does_not_see_the_tests_schema_on_its_path(
    workflow_env: WorkflowEnvironment, azync_store: PostgresStore, azync_dsn: str
) -> None:
    plain = await asyncpg.connect(azync_dsn)
    try:
        expected = await plain.fetchval("SHOW search_path")
    finally:
        await plain.close()
    env = await workflow_env.start([kit_search_path], [kit_where_am_i])
    path = await (await env.client.start(kit_search_path)).result(timeout=10)
    assert path == expected
    assert azync_store.schema not in path


async def test_a_steps_sql_runs_alone_through_fn_in_a_transaction_of_the_test(
    azync_store: PostgresStore, app: str
) -> None:
    async with azync_store.pool.acquire() as conn, conn.transaction():
        assert await kit_debit.fn(conn, app, "a", 300) == 700
