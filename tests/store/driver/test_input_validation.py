"""Bad input gets a clear ValueError at the boundary and loses nothing (no raw driver error)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import Source
from azync_flow.testing import unique_schema
from azync_flow.worker import Worker
from tests.store.helpers import job


async def _count(store: PostgresStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM azync_jobs"))


@pytest.mark.parametrize("attempts", [-1, 0])
async def test_enqueue_rejects_explicit_attempt_budget_below_one(
    store: PostgresStore, attempts: int
) -> None:
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        await store.enqueue(job(max_attempts=attempts, max_attempts_explicit=True))
    assert await _count(store) == 0


async def test_enqueue_accepts_explicit_budget_of_one_and_implicit_zero(
    store: PostgresStore,
) -> None:
    one = job(max_attempts=1, max_attempts_explicit=True)
    assert await store.enqueue(one)
    assert await store.enqueue(job(max_attempts=0))
    assert (await store.get_job(Source.QUEUE, one.id)).max_attempts == 1


@pytest.mark.parametrize("attempts", [-1, 0])
async def test_worker_rejects_attempt_budget_below_one(store: PostgresStore, attempts: int) -> None:
    w = Worker(store, handle_signals=False)

    async def handler(p: object) -> None:
        return None

    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        w.register("k", handler, max_attempts=attempts)
    assert "k" not in w.handlers
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        Worker(store, max_attempts=attempts, handle_signals=False)


def test_retry_policy_rejects_negative_maximum_attempts() -> None:
    with pytest.raises(ValueError, match="maximum_attempts must be >= 0"):
        RetryPolicy(maximum_attempts=-1, initial_interval=timedelta(seconds=1))


@pytest.mark.parametrize(
    "config",
    [Config(schema="pg_catalog"), Config(schema="pg_mine"), Config(notify_channel="pg_wake")],
    ids=["pg_catalog", "pg_schema", "pg_channel"],
)
async def test_open_store_rejects_reserved_pg_names(pg_dsn: str, config: Config) -> None:
    with pytest.raises(ValueError, match="reserved by PostgreSQL"):
        await open_store(pg_dsn, config)


@pytest.mark.parametrize("dsn", ["", "   "], ids=["empty", "blank"])
async def test_open_store_rejects_empty_dsn_and_names_azync_dsn(dsn: str) -> None:
    with pytest.raises(ValueError, match="AZYNC_DSN"):
        await open_store(dsn, Config(schema=unique_schema()))
