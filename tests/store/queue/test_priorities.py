"""Priorities in the queue store (real PostgreSQL): a lease takes higher
priorities first, aged by waiting (a job of priority p is ordered as if due p
minutes earlier, so none starves)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock

from ..helpers import job, lease


async def _one_by_one(store: PostgresStore, kind: str, n: int, source: Source) -> list[uuid.UUID]:
    order = []
    for _ in range(n):
        (got,) = await lease(store, kind, limit=1, source=source)
        order.append(got.id)
    return order


async def test_a_lease_takes_higher_priorities_first(store: PostgresStore) -> None:
    ps = {p: job("k", priority=p) for p in (5, 0, 10, -1)}
    assert all(await store.enqueue_many(list(ps.values())))
    order = await _one_by_one(store, "k", 4, Source.QUEUE)
    assert order == [ps[10].id, ps[5].id, ps[0].id, ps[-1].id]
    batch = [job("b", priority=p) for p in (1, 3, 2)]
    assert all(await store.enqueue_many(batch))
    assert [j.priority for j in await lease(store, "b")] == [3, 2, 1]


async def test_a_waiting_job_ages_a_minute_per_priority_level(
    store: PostgresStore, clock: MovableClock
) -> None:
    """A job of priority 0 that waited 20 minutes goes before a new one of
    priority 10 and after a new one of priority 30."""
    old = job("k")
    assert await store.enqueue(old)
    clock.advance(timedelta(minutes=20))
    ten, thirty = job("k", priority=10), job("k", priority=30)
    assert all(await store.enqueue_many([ten, thirty]))
    assert await _one_by_one(store, "k", 3, Source.QUEUE) == [thirty.id, old.id, ten.id]


async def test_a_priority_out_of_range_is_refused(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="priority"):
        await store.enqueue(job("k", priority=10_001))
