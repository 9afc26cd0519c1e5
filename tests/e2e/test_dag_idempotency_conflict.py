"""A DAG run reusing a live run's idempotency key with a different request is a clear
conflict (like workflow starts); the same request returns the live run."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.errors import ConflictError, DAGIdempotencyConflictError
from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore


def _dag(kind_of_b: str = "b") -> DAG:
    d = DAG("idem")

    @d.task
    async def a(ctx: TaskContext) -> None:
        return None

    async def b(ctx: TaskContext) -> None:
        return None

    d.task(b, key=kind_of_b, after=[a])
    return d


async def test_same_request_returns_live_run_even_with_a_new_trace(store: PostgresStore) -> None:
    client = DAGClient(store, tracer_provider=TracerProvider())
    first = await client.run(_dag(), {"order": 1}, idempotency_key="o1", meta={"t": "x"})
    again = await client.run(_dag(), {"order": 1}, idempotency_key="o1", meta={"t": "x"})
    assert first.inserted
    assert "traceparent" in (await client.tasks(first.id))[0].meta
    assert (again.inserted, again.id) == (False, first.id)


async def test_different_input_meta_or_shape_with_live_key_raises_conflict(
    store: PostgresStore,
) -> None:
    client = DAGClient(store)
    first = await client.run(_dag(), {"order": 1}, idempotency_key="o1", meta={"t": "x"})
    with pytest.raises(DAGIdempotencyConflictError, match=r"task 'a' \(payload\)") as e:
        await client.run(_dag(), {"order": 2}, idempotency_key="o1", meta={"t": "x"})
    assert e.value.existing_id == first.id
    assert isinstance(e.value, ConflictError)
    with pytest.raises(DAGIdempotencyConflictError, match=r"\(meta\)"):
        await client.run(_dag(), {"order": 1}, idempotency_key="o1", meta={"t": "y"})
    with pytest.raises(DAGIdempotencyConflictError, match=r"task 'c' \(kind\)"):
        await client.run(_dag("c"), {"order": 1}, idempotency_key="o1", meta={"t": "x"})
    async with store.pool.acquire() as conn, conn.transaction():
        with pytest.raises(DAGIdempotencyConflictError):
            await client.run_tx(conn, _dag(), {"order": 3}, idempotency_key="o1")
    views, total = await client.list(dag=_dag())
    assert (total, views[0].id) == (1, first.id)
    await client.cancel(first.id)
    freed = await client.run(_dag(), {"order": 2}, idempotency_key="o1")
    assert freed.inserted
    assert (await store.get_dag(freed.id)).state == DAGState.RUNNING
