"""Task queues in the queue store (real PostgreSQL): a job lease takes only the
jobs of the task queues it names, in the lease statement; ``release_blocked``
leaves a job for another worker with the reason kept."""

from __future__ import annotations

from datetime import timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock

from ..helpers import job, lease, row


async def test_a_job_lease_takes_only_jobs_of_the_queues_it_names(store: PostgresStore) -> None:
    on_a = [job("k", task_queue="a") for _ in range(3)]
    on_b = [job("k", task_queue="b") for _ in range(2)]
    on_default = job("k")
    assert all(await store.enqueue_many([*on_a, *on_b, on_default]))
    assert {j.id for j in await lease(store, "k", task_queues=("a",))} == {p.id for p in on_a}
    assert [j.id for j in await lease(store, "k")] == [on_default.id]
    both = await lease(store, "k", task_queues=("b", "c"))
    assert {j.id for j in both} == {p.id for p in on_b}
    assert {j.task_queue for j in both} == {"b"}


async def test_a_job_lease_over_several_queues_takes_the_oldest_of_them_all(
    store: PostgresStore,
) -> None:
    ids = []
    for i in range(6):
        p = job("k", task_queue="a" if i % 2 else "b", delay=timedelta(seconds=-10 + i))
        assert await store.enqueue(p)
        ids.append(p.id)
    got = await lease(store, "k", limit=3, task_queues=("a", "b"))
    assert [j.id for j in got] == ids[:3]


async def test_an_empty_task_queue_is_the_default_queue(store: PostgresStore) -> None:
    p = job("k", task_queue="")
    assert await store.enqueue(p)
    assert (await row(store, p.id))["task_queue"] == "default"


async def test_a_task_queue_with_nul_is_refused(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="task_queue"):
        await store.enqueue(job("k", task_queue="a\x00b"))


async def test_release_blocked_gives_the_attempt_back_and_keeps_the_reason(
    store: PostgresStore,
) -> None:
    p = job("k")
    assert await store.enqueue(p)
    (leased,) = await lease(store, "k")
    assert leased.lease_token is not None
    await store.release_blocked(leased.id, leased.lease_token, "no handler here")
    r = await row(store, p.id)
    assert (r["state"], r["attempt"], r["blocked_reason"]) == ("pending", 0, "no handler here")
    (again,) = await lease(store, "k")
    assert (again.attempt, again.blocked_reason) == (1, "no handler here")
    with pytest.raises(NotFoundError):
        await store.release_blocked(leased.id, leased.lease_token, "again")


async def test_release_blocked_with_a_delay_schedules_the_job_that_much_later(
    store: PostgresStore, clock: MovableClock
) -> None:
    now = clock.advance(timedelta(0))
    p = job("k")
    assert await store.enqueue(p)
    (leased,) = await lease(store, "k")
    assert leased.lease_token is not None
    await store.release_blocked(leased.id, leased.lease_token, "no key", timedelta(minutes=5))
    r = await row(store, p.id)
    assert (r["state"], r["attempt"], r["blocked_reason"]) == ("scheduled", 0, "no key")
    assert r["run_at"] == now + timedelta(minutes=5)
    assert await store.promote_due(Source.QUEUE) == 0
    assert await lease(store, "k") == []
    clock.advance(timedelta(minutes=6))
    assert await store.promote_due(Source.QUEUE) == 1
    (again,) = await lease(store, "k")
    assert (again.attempt, again.blocked_reason) == (1, "no key")
