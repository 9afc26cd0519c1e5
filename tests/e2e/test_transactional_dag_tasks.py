"""Transactional DAG tasks run by the DAG runner on real PostgreSQL: the
handler's SQL on ``ctx.connection`` commits with the task's result, a failed
attempt's writes are rolled back before its retry, a serialization failure
re-runs the handler in the same attempt, a plain task has no connection."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from tests.e2e.dag_util import runner, settle

RUNS: list[str] = []
OTHER: list[Any] = []


@pytest.fixture
async def table(store: PostgresStore) -> AsyncIterator[str]:
    RUNS.clear()
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.ledger (task text, n int)")
    await store.pool.execute(f"CREATE TABLE {name}.ledger_sums (id int PRIMARY KEY, total int)")
    await store.pool.execute(f"INSERT INTO {name}.ledger_sums VALUES (1, 0)")
    yield f"{name}.ledger"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


def booking_dag(table: str) -> DAG:
    d = DAG("booking")

    @d.task(transactional=True)
    async def book(ctx: TaskContext) -> int:
        RUNS.append("book")
        await ctx.connection.execute(f"INSERT INTO {table} VALUES ('book', 1)")
        return 1

    @d.task(after=[book], transactional=True, max_attempts=3)
    async def flaky(ctx: TaskContext) -> int:
        RUNS.append("flaky")
        await ctx.connection.execute(f"INSERT INTO {table} VALUES ('flaky', 2)")
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails after its insert")
        return 2

    @d.task(after=[flaky], transactional=True, isolation="repeatable_read")
    async def conflicting(ctx: TaskContext) -> int:
        RUNS.append("conflict")
        await ctx.connection.fetchval(f"SELECT total FROM {table}_sums WHERE id = 1")
        if RUNS.count("conflict") == 1:  # another transaction commits after our snapshot
            await OTHER[0].execute(f"UPDATE {table}_sums SET total = total + 100 WHERE id = 1")
        total: int = await ctx.connection.fetchval(
            f"UPDATE {table}_sums SET total = total + 1 WHERE id = 1 RETURNING total"
        )
        await ctx.connection.execute(f"INSERT INTO {table} VALUES ('conflict', 3)")
        return total

    @d.task(after=[conflicting])
    async def plain(ctx: TaskContext) -> str:
        try:
            ctx.connection  # noqa: B018 - raises: not transactional
        except RuntimeError as err:
            return str(err)
        return "had a connection"

    return d


async def test_transactional_tasks_write_once_with_their_results(
    store: PostgresStore, table: str, pg_dsn: str
) -> None:
    d = booking_dag(table)
    OTHER.append(await asyncpg.connect(pg_dsn))
    try:
        run = await DAGClient(store).run(d)
        view = await settle(store, runner(store, d), run.id)
    finally:
        await OTHER.pop().close()
    assert view.state == DAGState.SUCCEEDED
    assert RUNS == ["book", "flaky", "flaky", "conflict", "conflict"]
    rows = await store.pool.fetch(f"SELECT * FROM {table} ORDER BY n")
    assert [tuple(r) for r in rows] == [("book", 1), ("flaky", 2), ("conflict", 3)]
    results = await store.task_results(run.id, [])
    assert results["conflicting"].result == b"101"
    assert b"not transactional" in (results["plain"].result or b"")
    tasks = {j.task_key: j.attempt for j in await store.dag_tasks(run.id)}
    assert (tasks["book"], tasks["flaky"], tasks["conflicting"]) == (1, 2, 1)


def test_an_unknown_isolation_level_is_refused() -> None:
    with pytest.raises(ValueError, match="isolation"):
        DAG("x").task(transactional=True, isolation="chaos")
