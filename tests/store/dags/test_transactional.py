"""Transactional DAG tasks in the DAG store (``TransactionalDAGConsumer``): the
handler's SQL and the task's ack with its result commit in one transaction,
fenced by the task's lease; the handler's SQL runs with the database's
default search_path."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.dags import TransactionalDAGConsumer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from tests.store.dag_helpers import create, lease, params, task, tasks_by_key


@pytest.fixture
async def ledger(store: PostgresStore) -> AsyncIterator[str]:
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.ledger (task text, n int)")
    yield f"{name}.ledger"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


async def rows(store: PostgresStore, table: str) -> list[tuple[str, int]]:
    return [tuple(r) for r in await store.pool.fetch(f"SELECT * FROM {table} ORDER BY n")]


async def test_the_store_offers_transactional_tasks(store: PostgresStore) -> None:
    assert isinstance(store, TransactionalDAGConsumer)


async def test_handler_writes_and_the_task_result_commit_together(
    store: PostgresStore, ledger: str
) -> None:
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    assert j.lease_token is not None
    async with store.dag_task_transaction(j.id, j.lease_token) as tx:
        await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('a', 1)")
        await tx.ack(b'{"ok":1}')
    done = (await tasks_by_key(store, dag_id))["a"]
    assert (done.state, done.result) == (JobState.SUCCEEDED, b'{"ok":1}')
    assert await rows(store, ledger) == [("a", 1)]


async def test_leaving_without_the_ack_rolls_the_task_writes_back(
    store: PostgresStore, ledger: str
) -> None:
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    assert j.lease_token is not None

    async def handler_raises() -> None:
        async with store.dag_task_transaction(j.id, j.lease_token) as tx:  # type: ignore[arg-type]
            await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('a', 1)")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await handler_raises()
    assert await rows(store, ledger) == []
    assert (await tasks_by_key(store, dag_id))["a"].state == JobState.ACTIVE


async def test_a_stale_token_opens_no_task_transaction(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    entered = False
    with pytest.raises(NotFoundError):
        async with store.dag_task_transaction(j.id, uuid.uuid4()):
            entered = True
    assert not entered


async def test_an_ack_after_the_lease_was_taken_writes_nothing(
    store: PostgresStore, ledger: str
) -> None:
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    assert j.lease_token is not None
    async with store.dag_task_transaction(j.id, j.lease_token) as tx:
        await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('a', 1)")
        await store.release(j.id, j.lease_token)  # the lease is gone meanwhile
        with pytest.raises(NotFoundError):
            await tx.ack(None)
    assert await rows(store, ledger) == []
    assert (await tasks_by_key(store, dag_id))["a"].state == JobState.PENDING


async def test_task_sql_runs_with_the_database_default_search_path(
    store: PostgresStore, pg_dsn: str
) -> None:
    plain = await asyncpg.connect(pg_dsn)
    try:
        expected = await plain.fetchval("SHOW search_path")
    finally:
        await plain.close()
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    assert j.lease_token is not None
    async with store.dag_task_transaction(j.id, j.lease_token, isolation="repeatable_read") as tx:
        seen = await tx.connection.fetchval("SHOW search_path")
        level = await tx.connection.fetchval("SHOW transaction_isolation")
        await tx.ack(None)
    assert (seen, level) == (expected, "repeatable read")
