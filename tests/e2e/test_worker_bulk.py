"""Bulk producers end to end: jobs of ``Client.enqueue_many`` and executions of
``Client.start_many`` run on a real Worker; the client's checks and ``conn=``."""

from __future__ import annotations

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import IdempotencyConflictError, PayloadEncodeError
from azync_flow.store.admin import JobFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState, Source
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


class Item(msgspec.Struct):
    n: int


@activity(name="double")
def double(n: int) -> int:
    return 2 * n


@workflow(name="bulk_double")
async def bulk_double(ctx: WorkflowContext, item: Item) -> int:
    return await double(item.n)


async def _count(store: PostgresStore, sql: str) -> int:
    return int(await store.pool.fetchval(sql))


async def test_worker_runs_bulk_enqueued_jobs_and_bulk_started_workflows(
    store: PostgresStore,
) -> None:
    runtime = LocalRuntime(store, Registry([bulk_double], [double]))
    seen: list[int] = []

    @runtime.worker.register("bulk.add")
    async def add(item: Item) -> None:
        seen.append(item.n)

    client = Client(store)
    job_ids = await client.enqueue_many(
        "bulk.add",
        [Item(n) for n in range(200)],
        idempotency_keys=[f"k{n % 150}" for n in range(200)],  # 50 repeat a key
    )
    assert None not in job_ids[:150]
    assert job_ids[150:] == [None] * 50
    handles = await client.start_many(bulk_double, [Item(n) for n in range(20)])
    assert all(h.started for h in handles)

    await runtime.run_until_idle()

    assert sorted(seen) == list(range(150))
    jobs, total = await store.list_jobs(Source.QUEUE, JobFilter(kind="bulk.add"), 0, 200)
    assert total == 150
    assert {j.state for j in jobs} == {JobState.SUCCEEDED}
    assert [await h.result() for h in handles] == [2 * n for n in range(20)]
    again = await client.start_many(bulk_double, [Item(0)], ids=[handles[0].id])
    assert (again[0].id, again[0].started) == (handles[0].id, False)


async def test_client_bulk_verbs_join_the_callers_transaction(store: PostgresStore) -> None:
    client = Client(store)
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        ids = await client.enqueue_many("bulk.add", [Item(1), Item(2)], conn=conn)
        handles = await client.start_many(bulk_double, [Item(1)], idempotency_keys=["x"], conn=conn)
        assert None not in ids
        assert handles[0].started
        await tx.rollback()
    assert await _count(store, "SELECT count(*) FROM azync_jobs") == 0
    assert await _count(store, "SELECT count(*) FROM azync_workflow_executions") == 0
    async with store.pool.acquire() as conn:
        with pytest.raises(ValueError, match="no open transaction"):
            await client.enqueue_many("bulk.add", [Item(1)], conn=conn)
        with pytest.raises(ValueError, match="no open transaction"):
            await client.start_many(bulk_double, [Item(1)], conn=conn)
    with pytest.raises(TypeError, match="asyncpg connection"):
        await client.enqueue_many("bulk.add", [Item(1)], conn=store.pool.raw)


async def test_client_bulk_verbs_check_every_item_before_writing(store: PostgresStore) -> None:
    client = Client(store)
    with pytest.raises(PayloadEncodeError):
        await client.enqueue_many("bulk.add", [Item(1), float("nan")])
    with pytest.raises(ValueError, match="idempotency_keys has 1 entries for 2 items"):
        await client.enqueue_many("bulk.add", [1, 2], idempotency_keys=["a"])
    with pytest.raises(PayloadEncodeError):
        await client.start_many("bulk_double", [{"n": 1}, float("inf")])
    with pytest.raises(TypeError, match="start_many"):
        await client.start_many(object(), [1])  # type: ignore[call-overload]
    (held,) = await client.start_many(bulk_double, [Item(1)], idempotency_keys=["h"])
    with pytest.raises(IdempotencyConflictError):
        await client.start_many(bulk_double, [Item(3), Item(2)], idempotency_keys=["", "h"])
    assert await _count(store, "SELECT count(*) FROM azync_jobs WHERE source = 'queue'") == 0
    assert await _count(store, "SELECT count(*) FROM azync_workflow_executions") == 1
    assert held.started
