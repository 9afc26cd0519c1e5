"""Contract clauses of Store enqueue/dequeue/ack against real PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.store import DequeueParams, EnqueueParams, JobState, NotFoundError, Source
from azync_flow.store.postgres import PostgresStore

LEASE = timedelta(seconds=30)


def _job(kind: str = "k", **kw: object) -> EnqueueParams:
    return EnqueueParams(id=uuid.uuid4(), kind=kind, payload=b'{"x":1}', **kw)  # type: ignore[arg-type]


async def _lease(store: PostgresStore, kind: str = "k", limit: int = 10):
    return await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind=kind, limit=limit, lease=LEASE)
    )


async def test_dequeue_increments_attempt_and_mints_token(store: PostgresStore) -> None:
    p = _job()
    assert await store.enqueue(p)
    (job,) = await _lease(store)
    assert job.id == p.id
    assert job.state == JobState.ACTIVE
    assert job.attempt == 1
    assert job.lease_token is not None
    assert job.payload == b'{"x":1}'
    assert await _lease(store) == []


async def test_ack_with_stale_token_is_not_found_and_changes_nothing(store: PostgresStore) -> None:
    await store.enqueue(_job())
    (job,) = await _lease(store)
    with pytest.raises(NotFoundError):
        await store.ack(job.id, uuid.uuid4())
    await store.ack(job.id, job.lease_token)
    with pytest.raises(NotFoundError):
        await store.ack(job.id, job.lease_token)
