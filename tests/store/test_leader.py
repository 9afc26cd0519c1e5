"""Contract clauses of LeaderElector / LeaseElector on advisory locks."""

from __future__ import annotations

from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.testing import drop_schema

from .helpers import eventually


async def _other(pg_dsn: str, schema: str) -> PostgresStore:
    """A second store instance (another worker process) on the same schema."""
    return await open_store(pg_dsn, Config(schema=schema), migrate=False)


async def test_leadership_is_exclusive_until_released(
    store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    other = await _other(pg_dsn, schema)
    try:
        lease = await store.acquire_leadership_lease("maint")
        assert lease is not None
        assert await lease.valid()
        assert await other.acquire_leadership_lease("maint") is None
        assert await other.acquire_leadership_lease("another-name") is not None
        await lease.release()
        await lease.release()  # idempotent
        assert not await lease.valid()
        taken = await other.acquire_leadership_lease("maint")
        assert taken is not None
        await taken.release()
    finally:
        await other.close()


async def test_leadership_lease_invalid_after_session_terminated(
    store: PostgresStore, pg_dsn: str, schema: str
) -> None:
    lease = await store.acquire_leadership_lease("maint")
    assert lease is not None
    key = await store.pool.fetchval("SELECT hashtextextended($1, 0)", f"{schema}/maint")
    holder = await store.pool.fetchval(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND ((classid::bigint << 32) | objid::bigint) = $1",
        key,
    )
    assert holder is not None
    assert await store.pool.fetchval("SELECT pg_terminate_backend($1)", holder)

    async def lost() -> bool:
        return not await lease.valid()

    await eventually(lost)
    assert not await lease.valid()  # sticky
    other = await _other(pg_dsn, schema)
    try:
        taken = await other.acquire_leadership_lease("maint")
        assert taken is not None
        await taken.release()
    finally:
        await other.close()
    await lease.release()  # releasing a lost lease is harmless


async def test_acquire_leadership_returns_release_or_none(store: PostgresStore) -> None:
    release = await store.acquire_leadership("maint")
    assert release is not None
    assert await store.acquire_leadership("maint") is None
    await release()
    again = await store.acquire_leadership("maint")
    assert again is not None
    await again()


async def test_leadership_is_scoped_to_the_schema(store: PostgresStore, pg_dsn: str) -> None:
    elsewhere = await open_store(pg_dsn, Config(schema=f"{store.schema}_b"))
    try:
        mine = await store.acquire_leadership_lease("maint")
        theirs = await elsewhere.acquire_leadership_lease("maint")
        assert mine is not None
        assert theirs is not None
        await mine.release()
        await theirs.release()
    finally:
        await elsewhere.close()
        await drop_schema(pg_dsn, f"{store.schema}_b")
