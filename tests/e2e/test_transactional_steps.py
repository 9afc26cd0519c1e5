"""Transactional steps (``@transaction``) on a real Worker and PostgreSQL: the
step's SQL and its recorded result commit together, a failing step's writes
are rolled back before its retry, a serialization failure re-runs the whole
step without spending an attempt, and the step's SQL sees the database's
default search_path. Each test runs with the sticky cache on (the result folded
with the next pass) and off (the result recorded alone)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from azync_flow import attach_workflows, transaction, workflow
from azync_flow.client import Client
from azync_flow.errors import WorkflowFailedError
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

RUNS: list[str] = []
#: A second pool for the concurrent writer of the serialization test.
OTHER: list[Any] = []


@transaction(name="debit")
async def debit(conn: asyncpg.Connection, table: str, step: str, cents: int) -> int:
    RUNS.append(step)
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ($1, $2)", step, cents)
    return cents


@transaction(
    name="flaky_debit",
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10)),
)
async def flaky_debit(conn: asyncpg.Connection, table: str, step: str) -> str:
    RUNS.append(step)
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ($1, 1)", step)
    if RUNS.count(step) == 1:
        raise RuntimeError("the first attempt fails after its insert")
    return "ok"


@transaction(name="conflicting_debit", isolation="repeatable_read")
async def conflicting_debit(conn: asyncpg.Connection, table: str, account: str) -> int:
    RUNS.append("conflict")
    await conn.fetchval(f"SELECT cents FROM {table}_accounts WHERE id = $1", account)
    if RUNS.count("conflict") == 1:  # another transaction commits after our snapshot
        await OTHER[0].execute(
            f"UPDATE {table}_accounts SET cents = cents + 100 WHERE id = $1", account
        )
    balance: int = await conn.fetchval(
        f"UPDATE {table}_accounts SET cents = cents - 10 WHERE id = $1 RETURNING cents", account
    )
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ('conflict', -10)")
    return balance


@transaction(name="where_am_i")
async def where_am_i(conn: asyncpg.Connection) -> str:
    path: str = await conn.fetchval("SHOW search_path")
    return path


@transaction(name="publishing_debit")
async def publishing_debit(conn: asyncpg.Connection, table: str) -> str:
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ('published', 9)")
    return str(await OTHER[0].publish("debited", {"cents": 9}, conn=conn))


@transaction(name="committing_debit")
async def committing_debit(conn: asyncpg.Connection, table: str) -> int:
    RUNS.append("commit")
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ('committed', 7)")
    await conn.execute("COMMIT")
    return 7


@transaction(name="closing_debit")
async def closing_debit(conn: asyncpg.Connection, table: str) -> int:
    RUNS.append("close")
    await conn.execute(f"INSERT INTO {table} (step, cents) VALUES ('closed', 8)")
    await conn.close()
    return 8


@workflow(name="three_debits")
async def three_debits(ctx: WorkflowContext, table: str) -> list[int]:
    return [await debit(table, f"d{i}", i) for i in range(1, 4)]


@workflow(name="flaky")
async def flaky(ctx: WorkflowContext, table: str) -> str:
    return await flaky_debit(table, "f1")


@workflow(name="conflicting")
async def conflicting(ctx: WorkflowContext, table: str) -> int:
    return await conflicting_debit(table, "a")


@workflow(name="search_path")
async def search_path(ctx: WorkflowContext) -> str:
    return await where_am_i()


@workflow(name="publishes_in_its_transaction")
async def publishes_in_its_transaction(ctx: WorkflowContext, table: str) -> str:
    return await publishing_debit(table)


@workflow(name="commits_its_connection")
async def commits_its_connection(ctx: WorkflowContext, table: str) -> int:
    return await committing_debit(table)


@workflow(name="closes_its_connection")
async def closes_its_connection(ctx: WorkflowContext, table: str) -> int:
    return await closing_debit(table)


@workflow(name="always_fails")
async def always_fails(ctx: WorkflowContext, table: str) -> str:
    return await flaky_debit.with_options(retry=RetryPolicy(maximum_attempts=1))(table, "x")


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest) -> int:
    RUNS.clear()
    return int(request.param)


@pytest.fixture
async def table(store: PostgresStore) -> AsyncIterator[str]:
    """The application's tables, in a schema of their own (dropped after)."""
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.ledger (step text, cents int)")
    await store.pool.execute(
        f"CREATE TABLE {name}.ledger_accounts (id text PRIMARY KEY, cents int)"
    )
    await store.pool.execute(f"INSERT INTO {name}.ledger_accounts VALUES ('a', 1000)")
    yield f"{name}.ledger"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


def make_worker(store: PostgresStore, cache_size: int) -> Worker:
    worker = Worker(
        store,
        lease=timedelta(seconds=30),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        maintain=(),
        handle_signals=False,
    )
    attach_workflows(
        worker,
        [
            three_debits,
            flaky,
            conflicting,
            search_path,
            always_fails,
            commits_its_connection,
            closes_its_connection,
            publishes_in_its_transaction,
        ],
        [
            debit,
            flaky_debit,
            conflicting_debit,
            where_am_i,
            committing_debit,
            closing_debit,
            publishing_debit,
        ],
        cache_size=cache_size,
    )
    return worker


async def ledger(store: PostgresStore, table: str) -> list[tuple[str, int]]:
    return [tuple(r) for r in await store.pool.fetch(f"SELECT * FROM {table} ORDER BY step")]


async def ops(store: PostgresStore, run_id: uuid.UUID) -> list[tuple[str, str, int]]:
    rows = await store.pool.fetch(
        "SELECT kind, state, attempt FROM azync_jobs WHERE run_id = $1 AND kind LIKE '$op:%'"
        " ORDER BY enqueued_at",
        run_id,
    )
    return [(r["kind"], r["state"], r["attempt"]) for r in rows]


async def completed(client: Client, run_id: uuid.UUID) -> list[int]:
    return [
        e.event.scheduled_seq  # type: ignore[attr-defined]
        for e in await client.get_handle(run_id).history()
        if type(e.event).__name__ == "ActivityCompleted"
    ]


async def test_each_step_writes_once_with_its_recorded_result(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    client = Client(store)
    async with make_worker(store, cache_size):
        handle = await client.start(three_debits, table)
        assert await handle.result(timeout=20) == [1, 2, 3]
    assert await ledger(store, table) == [("d1", 1), ("d2", 2), ("d3", 3)]
    assert RUNS == ["d1", "d2", "d3"]
    assert await completed(client, handle.id) == [1, 3, 5]
    assert await ops(store, handle.id) == [("$op:debit@1", "succeeded", 1)] * 3
    tasks = await store.pool.fetchval(
        "SELECT count(*) FROM azync_jobs WHERE run_id = $1 AND kind = '$wft'", handle.id
    )
    # sticky: each result was committed with the next pass (no workflow task)
    assert tasks == (1 if cache_size else 4)


async def test_a_failed_attempt_rolls_its_writes_back_before_the_retry(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    client = Client(store)
    async with make_worker(store, cache_size):
        handle = await client.start(flaky, table)
        assert await handle.result(timeout=20) == "ok"
    assert RUNS == ["f1", "f1"]
    assert await ledger(store, table) == [("f1", 1)]  # the first attempt's insert is gone
    assert await ops(store, handle.id) == [("$op:flaky_debit@1", "succeeded", 2)]


async def test_a_step_out_of_attempts_fails_the_workflow_with_nothing_written(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    client = Client(store)
    async with make_worker(store, cache_size):
        handle = await client.start(always_fails, table)
        with pytest.raises(WorkflowFailedError):
            await handle.result(timeout=20)
    assert await ledger(store, table) == []
    assert await ops(store, handle.id) == [("$op:flaky_debit@1", "dead", 1)]


async def test_a_serialization_failure_reruns_the_whole_step_in_the_same_attempt(
    store: PostgresStore, cache_size: int, table: str, pg_dsn: str
) -> None:
    OTHER.append(await asyncpg.connect(pg_dsn))
    client = Client(store)
    try:
        async with make_worker(store, cache_size):
            handle = await client.start(conflicting, table)
            assert await handle.result(timeout=20) == 1090  # 1000 + 100 - 10
    finally:
        await OTHER.pop().close()
    assert RUNS == ["conflict", "conflict"]  # the first run met 40001 and was rolled back
    assert await ledger(store, table) == [("conflict", -10)]
    assert await ops(store, handle.id) == [("$op:conflicting_debit@1", "succeeded", 1)]


async def test_the_step_sql_runs_in_the_database_default_search_path(
    store: PostgresStore, cache_size: int, pg_dsn: str
) -> None:
    plain = await asyncpg.connect(pg_dsn)
    try:
        expected = await plain.fetchval("SHOW search_path")
    finally:
        await plain.close()
    async with make_worker(store, cache_size):
        handle = await Client(store).start(search_path)
        assert await handle.result(timeout=20) == expected
    assert store.schema not in expected


async def test_a_step_that_commits_its_connection_fails_at_once_naming_the_misuse(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    """The step's own COMMIT cut its writes loose from its recorded result: the
    attempt fails at once, for good (not retried as an unavailable database
    until its lease ends), with an error naming the step and what it did."""
    async with make_worker(store, cache_size):
        handle = await Client(store).start(commits_its_connection, table)
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=20)
    assert failed.value.error_type == "ActivityError"
    assert "TransactionMisuseError" in failed.value.message
    assert "'committing_debit'" in failed.value.message
    assert "COMMIT or ROLLBACK" in failed.value.message
    assert RUNS == ["commit"]
    assert await ops(store, handle.id) == [("$op:committing_debit@1", "dead", 1)]
    # what the step committed itself stays committed: the error says so
    assert await ledger(store, table) == [("committed", 7)]


async def test_a_step_that_closes_its_connection_fails_at_once_naming_the_misuse(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    """Closing the step's connection is refused where it is called, so the
    connection stays the store's and the step's writes roll back; the attempt
    fails for good with an error naming the step and what it did."""
    async with make_worker(store, cache_size):
        handle = await Client(store).start(closes_its_connection, table)
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=20)
    assert "TransactionMisuseError" in failed.value.message
    assert "'closing_debit'" in failed.value.message
    assert "closed the connection" in failed.value.message
    assert RUNS == ["close"]
    assert await ops(store, handle.id) == [("$op:closing_debit@1", "dead", 1)]
    assert await ledger(store, table) == []
    assert await store.pool.fetchval("SELECT 1") == 1  # the store's pool is whole


async def test_a_step_hands_its_connection_to_verbs_taking_conn(
    store: PostgresStore, cache_size: int, table: str
) -> None:
    """The connection a step is given works wherever a transaction's
    connection is asked for (``conn=``): the event commits with the step."""
    OTHER.append(Client(store))
    try:
        async with make_worker(store, cache_size):
            handle = await Client(store).start(publishes_in_its_transaction, table)
            event_id = await handle.result(timeout=20)
    finally:
        OTHER.pop()
    assert await ledger(store, table) == [("published", 9)]
    assert (
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_events WHERE id = $1", uuid.UUID(event_id)
        )
        == 1
    )


def test_a_transactional_step_called_outside_a_workflow_says_how_to_call_it() -> None:
    with pytest.raises(TypeError, match=r"debit\.fn\(conn"):
        debit("t", "s", 1)  # type: ignore[unused-coroutine]


def test_a_sync_function_is_refused() -> None:
    def sync_step(conn: Any, x: int) -> int:
        return x

    with pytest.raises(TypeError, match="async def"):
        transaction(sync_step)  # type: ignore[arg-type]


def test_options_that_would_make_a_step_non_transactional_are_refused_per_call() -> None:
    with pytest.raises(TypeError, match="idempotent"):
        debit.with_options(idempotent=False)
