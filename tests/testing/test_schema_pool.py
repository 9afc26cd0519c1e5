"""The test schema pool: a released schema is reused only when it is exactly a
migrated schema, emptied; anything else is dropped."""

from __future__ import annotations

import asyncpg

from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.testing._schema import drop_pooled, release_schema, take_schema


async def exists(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema))


async def migrated_schema(dsn: str) -> str:
    schema = take_schema()
    store = await open_store(dsn, Config(schema=schema))
    await store.close()
    return schema


async def test_a_released_schema_comes_back_empty_with_its_migrations_and_sequences_restarted(
    pg_dsn: str,
) -> None:
    schema = await migrated_schema(pg_dsn)
    conn = await asyncpg.connect(pg_dsn)
    try:
        migrations = await conn.fetchval(f'SELECT count(*) FROM "{schema}".azync_migrations')
        await conn.execute(
            f"""INSERT INTO "{schema}".azync_jobs (id, source, kind, state, run_at,
                                                  enqueued_at, updated_at)
                VALUES (gen_random_uuid(), 'queue', 'k', 'pending', now(), now(), now())"""
        )
        first = await conn.fetchval(f"SELECT nextval('\"{schema}\".azync_event_order_seq')")
        await conn.fetchval(f"SELECT nextval('\"{schema}\".azync_event_order_seq')")
        await release_schema(pg_dsn, schema)

        taken = [take_schema() for _ in range(8)]
        assert schema in taken  # the pool hands it out again
        assert await conn.fetchval(f'SELECT count(*) FROM "{schema}".azync_jobs') == 0
        assert (
            await conn.fetchval(f'SELECT count(*) FROM "{schema}".azync_migrations') == migrations
        )
        assert await conn.fetchval(f"SELECT nextval('\"{schema}\".azync_event_order_seq')") == first
        for name in taken:
            await release_schema(pg_dsn, name)
    finally:
        await conn.close()


async def test_a_schema_a_test_changed_is_dropped_not_reused(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        changes = [
            'CREATE TABLE "{s}".orders (id int)',
            'CREATE INDEX ON "{s}".azync_jobs (kind)',
            'CREATE OR REPLACE FUNCTION "{s}".azync_lease_token() RETURNS uuid '
            "LANGUAGE sql AS $$ SELECT '00000000-0000-0000-0000-000000000000'::uuid $$",
            'DELETE FROM "{s}".azync_migrations WHERE version = '
            '(SELECT max(version) FROM "{s}".azync_migrations)',
        ]
        for change in changes:
            schema = await migrated_schema(pg_dsn)
            await conn.execute(change.format(s=schema))
            await release_schema(pg_dsn, schema)
            assert not await exists(conn, schema), change
    finally:
        await conn.close()


async def test_a_filled_or_locked_schema_is_dropped(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    other = await asyncpg.connect(pg_dsn)
    try:
        filled = await migrated_schema(pg_dsn)
        await conn.execute(
            f"""INSERT INTO "{filled}".azync_jobs (id, source, kind, state, run_at,
                                                  enqueued_at, updated_at, payload)
                SELECT gen_random_uuid(), 'queue', 'k', 'pending', now(), now(), now(),
                       convert_to(repeat(md5(g::text), 40), 'UTF8')
                FROM generate_series(1, 4000) g"""
        )
        await release_schema(pg_dsn, filled)
        assert not await exists(conn, filled)

        locked = await migrated_schema(pg_dsn)
        tx = other.transaction()
        await tx.start()
        await other.execute(f'LOCK TABLE "{locked}".azync_jobs IN ACCESS SHARE MODE')
        await release_schema(pg_dsn, locked)  # the drop ends the holder's session
        assert not await exists(conn, locked)
    finally:
        await conn.close()
        await other.close()


async def test_the_session_end_drops_every_pooled_schema(pg_dsn: str) -> None:
    schema = await migrated_schema(pg_dsn)
    await release_schema(pg_dsn, schema)
    conn = await asyncpg.connect(pg_dsn)
    try:
        assert await exists(conn, schema)
        await drop_pooled()
        assert not await exists(conn, schema)
        assert take_schema() != schema
    finally:
        await conn.close()
