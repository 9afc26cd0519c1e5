"""Contract clauses of IdentityClaimer: a worker identity fenced by its own
session, marking every lease, that takes back what a dead holder left."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow.errors import IdentityInUseError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.postgres.identity import identity_lock_key, token_prefix
from azync_flow.store.queue import Source
from azync_flow.testing import MovableClock
from tests.store.helpers import enqueue_and_lease, eventually, row

TTL = timedelta(seconds=10)


@pytest.fixture
async def other(pg_dsn: str, schema: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    """A second store instance (another worker process) on the same schema and clock."""
    s = await open_store(pg_dsn, Config(schema=schema), migrate=False, clock=clock)
    try:
        yield s
    finally:
        await s.close()


async def _kill_identity_session(store: PostgresStore, name: str) -> None:
    """End the session that fences ``name`` (what the server does when its process dies)."""
    key = identity_lock_key(store.schema, name) & 0xFFFF_FFFF_FFFF_FFFF
    ended = await store.pool.fetchval(
        """SELECT count(pg_terminate_backend(pid)) FROM pg_locks
           WHERE locktype = 'advisory' AND granted AND objsubid = 1
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND classid::bigint = $1 AND objid::bigint = $2""",
        key >> 32,
        key & 0xFFFF_FFFF,
    )
    assert ended == 1


async def _unheld(store: PostgresStore, name: str) -> bool:
    """Whether no session holds the lock that fences ``name``."""
    return bool(
        await store.pool.fetchval(
            "SELECT pg_try_advisory_lock($1) AND pg_advisory_unlock($1)",
            identity_lock_key(store.schema, name),
        )
    )


async def test_two_live_stores_never_hold_one_identity(
    store: PostgresStore, other: PostgresStore
) -> None:
    held = await store.claim_worker_identity("orders-0")
    assert held.name == "orders-0"
    with pytest.raises(IdentityInUseError, match="orders-0"):
        await other.claim_worker_identity("orders-0")
    await held.release()
    again = await other.claim_worker_identity("orders-0")
    assert again.name == "orders-0"


async def test_default_identities_are_the_first_free_host_slots(
    store: PostgresStore, other: PostgresStore
) -> None:
    first = await store.claim_worker_identity()
    second = await other.claim_worker_identity()
    host = first.name.rsplit("/", 1)[0]
    assert host == socket.gethostname()
    assert {first.name, second.name} == {f"{host}/0", f"{host}/1"}
    assert first.holder.startswith(first.name + ":")


async def test_a_store_holds_one_identity_and_shares_it(store: PostgresStore) -> None:
    held = await store.claim_worker_identity("a-1")
    assert await store.claim_worker_identity() is held
    assert await store.claim_worker_identity("a-1") is held
    with pytest.raises(ValueError, match="already holds worker identity 'a-1'"):
        await store.claim_worker_identity("b-1")
    await held.release()
    await held.release()
    assert await held.check()  # one user left
    await held.release()
    assert not await held.check()


@pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "semi;colon", "quote'"])
async def test_a_bad_identity_name_is_refused_before_anything_is_claimed(
    store: PostgresStore, bad: str
) -> None:
    with pytest.raises(ValueError, match="invalid worker identity"):
        await store.claim_worker_identity(bad)
    assert (await store.claim_worker_identity("fine")).name == "fine"


async def test_leases_taken_under_an_identity_carry_its_mark(
    store: PostgresStore, other: PostgresStore
) -> None:
    unmarked = await enqueue_and_lease(other, "k")
    await store.claim_worker_identity("mark-1")
    marked = await enqueue_and_lease(store, "k")
    assert marked.lease_token is not None
    assert unmarked.lease_token is not None
    assert str(marked.lease_token).startswith(token_prefix("mark-1"))
    assert not str(unmarked.lease_token).startswith(token_prefix("mark-1"))


async def test_claiming_a_dead_holders_identity_takes_back_its_leases_and_leaderships(
    store: PostgresStore, other: PostgresStore, clock: MovableClock, pg_dsn: str, schema: str
) -> None:
    clock.advance(timedelta(0))
    dead = await store.claim_worker_identity("w-1")
    held = await enqueue_and_lease(store, "k")
    lease = await store.acquire_leadership_lease("maint", TTL, holder=dead.holder)
    assert lease is not None
    live = await other.claim_worker_identity("w-2")
    kept = await enqueue_and_lease(other, "k")
    assert (await row(store, held.id))["lease_until"] > clock()

    await _kill_identity_session(store, "w-1")
    restarted = await open_store(pg_dsn, Config(schema=schema), migrate=False, clock=clock)
    try:
        taken = await restarted.claim_worker_identity("w-1")
        assert taken.taken_back == (1, 1)
        assert (await row(store, held.id))["lease_until"] == clock()
        assert (await row(store, kept.id))["lease_until"] > clock()
        assert await restarted.acquire_leadership_lease("maint", TTL) is not None
        clock.advance(timedelta(milliseconds=1))
        reaped, _ = await restarted.reap_expired(Source.QUEUE, None, 5)
        assert reaped == 1
        assert (await row(store, held.id))["state"] == "pending"
    finally:
        await restarted.close()
    assert live.name == "w-2"


async def test_a_lost_identity_session_is_claimed_again_unless_another_process_took_it(
    store: PostgresStore, other: PostgresStore
) -> None:
    held = await store.claim_worker_identity("s-1")
    await _kill_identity_session(other, "s-1")
    await eventually(lambda: _unheld(other, "s-1"))
    assert await held.check()  # its session ended: claimed again
    assert not await _unheld(other, "s-1")
    leased = await enqueue_and_lease(store, "k")
    with pytest.raises(IdentityInUseError):
        await other.claim_worker_identity("s-1")  # claimed again: still fenced

    await _kill_identity_session(other, "s-1")
    await eventually(lambda: _unheld(other, "s-1"))
    thief = await other.claim_worker_identity("s-1")
    assert thief.taken_back == (1, 0)
    assert not await held.check()
    assert (await row(store, leased.id))["state"] == "active"


async def test_workers_sharing_a_store_check_its_identity_at_once_and_keep_it(
    store: PostgresStore,
) -> None:
    held = await store.claim_worker_identity("shared-1")
    assert await store.claim_worker_identity() is held
    assert all(await asyncio.gather(*(held.check() for _ in range(8))))
    assert not await _unheld(store, "shared-1")
