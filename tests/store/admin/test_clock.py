"""StoreClock: the time the store's statements see."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock
from tests.store.helpers import job, row

T0 = datetime(2030, 1, 1, tzinfo=UTC)


async def test_current_time_is_the_backend_now_until_a_clock_override_is_set(
    store: PostgresStore, clock: MovableClock
) -> None:
    first = await store.pool.fetchval("SELECT now()")
    backend = await store.current_time()  # no override: the backend's now()
    assert first <= backend <= await store.pool.fetchval("SELECT now()")
    clock.set(T0)
    assert await store.current_time() == T0
    p = job(delay=timedelta(minutes=5))
    await store.enqueue(p)
    assert (await row(store, p.id))["run_at"] == T0 + timedelta(minutes=5)  # the same clock
    assert (await store.get_job(Source.QUEUE, p.id)).enqueued_at == T0
