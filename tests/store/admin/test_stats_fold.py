"""Counting inserts delta rows; ``fold_stats`` moves them into the daily counters.

Reads (``stats``, ``all_daily``, ``list_kinds``) sum both, so they are exact
before and after a fold; folds racing each other (or an open one) count each
delta exactly once; a fold is bounded by its limit.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres._queries import QUERIES
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock
from tests.store.helpers import enqueue_and_lease, job, stat_sums

#: Delta rows of the race tests, over three kinds, each (enqueued 1, processed 0|1).
DELTAS = 3000


async def record_deltas(store: PostgresStore, n: int) -> None:
    """``n`` counts through the hot path's function, one delta row each."""
    await store.pool.execute(
        "SELECT azync_job_count(now(), ARRAY[ROW('queue', 'r' || (g % 3), 1, g % 2, 0, 0)"
        "::azync_job_delta]) FROM generate_series(1, $1) g",
        n,
    )


async def totals(store: PostgresStore) -> dict[str, tuple[int, int]]:
    out = {}
    for kind in await store.list_kinds(Source.QUEUE):
        sums = await stat_sums(store, kind)
        out[kind] = (sums["enqueued"], sums["processed"])
    return out


async def pending_deltas(store: PostgresStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM azync_job_stat_deltas"))


EXPECTED = {"r0": (1000, 500), "r1": (1000, 500), "r2": (1000, 500)}


async def test_counts_survive_a_fold_exactly(store: PostgresStore, clock: MovableClock) -> None:
    t0 = clock.advance(timedelta(0))
    clock.set(t0 - timedelta(days=1))
    for k in ("a", "b"):
        j = await enqueue_and_lease(store, k)
        await store.ack(j.id, j.lease_token)
    clock.set(t0)
    j = await enqueue_and_lease(store, "a")
    await store.dead(j.id, j.lease_token, "boom")
    j = await enqueue_and_lease(store, "b")
    await store.skip(j.id, j.lease_token, "nothing to do")
    await store.enqueue(job("c"))
    before = ({k: await stat_sums(store, k) for k in "abc"}, await store.all_daily(Source.QUEUE))
    assert before[0]["a"] == {"enqueued": 2, "processed": 1, "failed": 1, "reaped": 0}
    assert before[0]["b"] == {"enqueued": 2, "processed": 2, "failed": 0, "reaped": 0}
    assert before[0]["c"] == {"enqueued": 1, "processed": 0, "failed": 0, "reaped": 0}
    assert [(d.enqueued, d.processed) for d in before[1][-2:]] == [(2, 2), (3, 1)]

    pending = await pending_deltas(store)
    assert pending > 0
    assert await store.fold_stats(100) == pending
    assert await pending_deltas(store) == 0
    after = ({k: await stat_sums(store, k) for k in "abc"}, await store.all_daily(Source.QUEUE))
    assert after == before
    assert await store.list_kinds(Source.QUEUE) == ["a", "b", "c"]
    # folded and unfolded counts of one day add up
    await store.enqueue(job("c"))
    assert (await stat_sums(store, "c"))["enqueued"] == 2


async def test_a_fold_is_bounded_by_its_limit(store: PostgresStore) -> None:
    await record_deltas(store, 30)
    assert await store.fold_stats(20) == 20
    assert await pending_deltas(store) == 10
    assert await totals(store) == {"r0": (10, 5), "r1": (10, 5), "r2": (10, 5)}
    assert await store.fold_stats(20) == 10
    assert await store.fold_stats(20) == 0
    assert await totals(store) == {"r0": (10, 5), "r1": (10, 5), "r2": (10, 5)}
    with pytest.raises(ValueError, match="positive"):
        await store.fold_stats(0)


async def test_racing_folds_count_each_delta_once(store: PostgresStore) -> None:
    await record_deltas(store, DELTAS)
    assert await totals(store) == EXPECTED

    async def fold_until_empty() -> int:
        folded = 0
        while n := await store.fold_stats(150):
            folded += n
        return folded

    folded = await asyncio.gather(*(fold_until_empty() for _ in range(6)))
    assert sum(folded) == DELTAS
    assert sum(1 for n in folded if n) >= 2  # the folds did overlap
    assert await pending_deltas(store) == 0
    assert await totals(store) == EXPECTED


async def fold_on(conn: asyncpg.Connection, limit: int) -> int:
    return int(await conn.fetchval(QUERIES["stats_fold"], None, limit))


async def lock_waiting(store: PostgresStore, pid: int) -> bool:
    state = await store.pool.fetchval(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid
    )
    return state == "Lock"


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
async def test_a_fold_racing_an_open_fold_skips_its_rows(
    store: PostgresStore, outcome: str
) -> None:
    """The second fold skips the rows the open one locked; it waits only to add
    to the same daily rows (folds run on the leader, off the hot path)."""
    await record_deltas(store, DELTAS)
    async with store.pool.acquire() as held, store.pool.acquire() as other:
        tx = held.transaction()
        await tx.start()
        assert await fold_on(held, 1000) == 1000
        racing = asyncio.create_task(fold_on(other, DELTAS))
        async with asyncio.timeout(10):
            while not await lock_waiting(store, other.get_server_pid()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert await totals(store) == EXPECTED  # neither fold is visible yet
        await (tx.commit() if outcome == "commit" else tx.rollback())
        assert await racing == DELTAS - 1000
    assert await store.fold_stats(DELTAS) == (0 if outcome == "commit" else 1000)
    assert await pending_deltas(store) == 0
    assert await totals(store) == EXPECTED
