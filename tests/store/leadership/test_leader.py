"""Contract clauses of LeaseElector: a lease on the backend clock
with a term that fences the holder's maintenance writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow.errors import LeadershipLostError, SchemaNotMigratedError, StoreUnavailableError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock, drop_schema
from tests.e2e._drop_proxy import DropProxy
from tests.store.helpers import enqueue_and_lease, row

TTL = timedelta(seconds=10)


@pytest.fixture
async def other(pg_dsn: str, schema: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    """A second store instance (another worker process) on the same schema and clock."""
    s = await open_store(pg_dsn, Config(schema=schema), migrate=False, clock=clock)
    try:
        yield s
    finally:
        await s.close()


async def test_leadership_is_acquired_when_free_and_refused_while_held(
    store: PostgresStore, other: PostgresStore
) -> None:
    lease = await store.acquire_leadership_lease("maint", TTL, holder="a")
    assert lease is not None
    assert lease.term == 1
    assert await lease.valid()
    assert await other.acquire_leadership_lease("maint", TTL) is None
    assert await store.acquire_leadership_lease("maint", TTL) is None  # not re-entrant either
    elsewhere = await other.acquire_leadership_lease("another-name", TTL)
    assert elsewhere is not None
    held = await store.pool.fetchrow("SELECT holder, term FROM azync_leaders WHERE name = 'maint'")
    assert (held["holder"], held["term"]) == ("a", 1)


async def test_leadership_is_taken_over_after_its_ttl_on_the_backend_clock(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    lease = await store.acquire_leadership_lease("maint", TTL)
    assert lease is not None
    clock.advance(TTL - timedelta(milliseconds=1))
    assert await other.acquire_leadership_lease("maint", TTL) is None  # not lapsed yet
    clock.advance(timedelta(milliseconds=1))
    taken = await other.acquire_leadership_lease("maint", TTL)
    assert taken is not None
    assert taken.term == lease.term + 1


async def test_renewal_by_the_holder_keeps_the_leadership(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    lease = await store.acquire_leadership_lease("maint", TTL)
    assert lease is not None
    first_expiry = lease.expires_at
    for _ in range(5):  # 5 x 0.8 TTL: lapsed long ago without the renewals
        clock.advance(TTL * 0.8)
        assert await lease.valid()
        assert await other.acquire_leadership_lease("maint", TTL) is None
    assert lease.expires_at == first_expiry + TTL * 4


async def test_renewal_after_the_lease_was_lost_is_refused(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    lease = await store.acquire_leadership_lease("maint", TTL)
    assert lease is not None
    clock.advance(TTL)
    assert not await lease.valid()  # lapsed: refused even before anyone took over
    assert await other.acquire_leadership_lease("maint", TTL) is not None
    assert not await lease.valid()
    assert not await lease.renew_if_due()  # sticky
    await lease.release()  # releasing a lost lease changes nothing
    assert await store.acquire_leadership_lease("maint", TTL) is None


async def test_terms_increase_with_every_change_of_holder(
    store: PostgresStore, other: PostgresStore
) -> None:
    terms = []
    for s in (store, other, store, other):
        lease = await s.acquire_leadership_lease("maint", TTL)
        assert lease is not None
        terms.append(lease.term)
        await lease.release()
        await lease.release()  # idempotent
        assert not await lease.valid()
    assert terms == [1, 2, 3, 4]


async def test_fenced_write_of_a_lost_term_is_refused_and_changes_nothing(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    stale = await store.acquire_leadership_lease("maint", TTL)
    assert stale is not None
    job = await enqueue_and_lease(store)  # leased for 30 s
    clock.advance(timedelta(seconds=31))  # both the job's and the leader's lease lapsed
    fresh = await other.acquire_leadership_lease("maint", TTL)
    assert fresh is not None
    with stale.fenced(), pytest.raises(LeadershipLostError, match="term 1"):
        await store.reap_expired(Source.QUEUE, None, 5)
    assert (await row(store, job.id))["state"] == "active"
    with fresh.fenced():
        assert await other.reap_expired(Source.QUEUE, None, 5) == (1, 0)
    assert (await row(store, job.id))["state"] == "pending"


async def test_takeover_waits_for_the_previous_terms_open_fenced_transaction(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    """A write the old term began before losing the lease commits inside its term:
    the new term starts only after that transaction ends."""
    clock.advance(timedelta(0))
    old = await store.acquire_leadership_lease("maint", TTL)
    assert old is not None
    with old.fenced():
        async with store.transaction() as conn:
            clock.advance(TTL)
            takeover = asyncio.create_task(other.acquire_leadership_lease("maint", TTL))
            await asyncio.sleep(0.3)
            assert not takeover.done()
            await conn.execute("SELECT 1")
    new = await takeover
    assert new is not None
    assert new.term == old.term + 1


async def test_a_holder_frozen_inside_a_fenced_transaction_is_cut_off_by_the_server(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    """The server ends a fenced transaction idle for a third of the TTL, so a
    frozen holder delays a takeover by at most that, and its write is lost."""
    ttl = timedelta(milliseconds=600)
    clock.advance(timedelta(0))
    old = await store.acquire_leadership_lease("maint", ttl)
    assert old is not None
    job = await enqueue_and_lease(store)

    async def frozen_write() -> None:
        with old.fenced():
            async with store.transaction() as conn:
                await conn.execute("UPDATE azync_jobs SET state = 'pending' WHERE id = $1", job.id)
                await asyncio.sleep(1.0)  # idle in transaction past ttl / 3
                await conn.execute("SELECT 1")

    with pytest.raises(StoreUnavailableError):  # the server ended the session
        await frozen_write()
    assert (await row(store, job.id))["state"] == "active"  # rolled back
    clock.advance(ttl)
    async with asyncio.timeout(2):
        new = await other.acquire_leadership_lease("maint", ttl)
    assert new is not None


async def test_a_holder_stuck_inside_a_fenced_statement_is_cut_off_by_the_takeover(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    """A lapsed holder whose fenced session stays active (frozen between two
    protocol messages, or a statement that never returns) gets no server
    timeout; the contender ends it after a third of the TTL and takes over."""
    ttl = timedelta(milliseconds=600)
    clock.advance(timedelta(0))
    old = await store.acquire_leadership_lease("maint", ttl)
    assert old is not None
    job = await enqueue_and_lease(store)

    async def stuck_write() -> None:
        with old.fenced():
            async with store.transaction() as conn:
                await conn.execute("UPDATE azync_jobs SET state = 'pending' WHERE id = $1", job.id)
                await conn.execute("SELECT pg_sleep(30)")  # active, never idle

    stuck = asyncio.create_task(stuck_write())
    await asyncio.sleep(0.3)
    clock.advance(ttl)
    async with asyncio.timeout(5):
        new = await other.acquire_leadership_lease("maint", ttl)
    assert new is not None
    assert new.term == old.term + 1
    with pytest.raises(StoreUnavailableError):  # its session was ended
        await stuck
    assert (await row(store, job.id))["state"] == "active"  # its write rolled back


async def test_leadership_is_scoped_to_the_schema(store: PostgresStore, pg_dsn: str) -> None:
    elsewhere = await open_store(pg_dsn, Config(schema=f"{store.schema}_b"))
    try:
        mine = await store.acquire_leadership_lease("maint", TTL)
        theirs = await elsewhere.acquire_leadership_lease("maint", TTL)
        assert mine is not None
        assert theirs is not None
        await mine.release()
        await theirs.release()
    finally:
        await elsewhere.close()
        await drop_schema(pg_dsn, f"{store.schema}_b")


async def test_leadership_ttl_must_be_positive(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="positive"):
        await store.acquire_leadership_lease("maint", timedelta(0))


async def test_release_lets_another_instance_take_the_leadership_at_once(
    store: PostgresStore, other: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))  # the clock stands still: no lapse can help
    lease = await store.acquire_leadership_lease("maint", TTL, holder="a")
    assert lease is not None
    assert await other.acquire_leadership_lease("maint", TTL) is None
    await lease.release()
    taken = await other.acquire_leadership_lease("maint", TTL, holder="b")
    assert taken is not None
    assert taken.term == lease.term + 1
    assert not await lease.valid()  # the released term is over for good
    held = await store.pool.fetchrow("SELECT holder FROM azync_leaders WHERE name = 'maint'")
    assert held["holder"] == "b"


async def test_acquiring_on_an_unreachable_database_raises_store_unavailable(
    pg_dsn: str, schema: str, store: PostgresStore
) -> None:
    async with DropProxy(pg_dsn) as proxy:
        through = await open_store(proxy.dsn, Config(schema=schema), migrate=False)
    try:
        # the proxy is gone: its connections are cut and its port refuses new ones
        with pytest.raises(StoreUnavailableError):
            await through.acquire_leadership_lease("maint", TTL)
    finally:
        await through.close()
    assert await store.acquire_leadership_lease("maint", TTL) is not None  # nothing was taken


async def test_a_database_refusing_the_acquire_raises_a_store_error_not_a_driver_error(
    store: PostgresStore,
) -> None:
    await store.pool.execute("DROP TABLE azync_leaders CASCADE")
    with pytest.raises(SchemaNotMigratedError, match="azync_leaders"):
        await store.acquire_leadership_lease("maint", TTL)
