"""Migrator clauses, Config validation, connection errors, and every named query
preparing against the real schema."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from azync_flow.errors import MigrationError, SchemaNotMigratedError, StoreDsnError, StoreError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.postgres._migrate import migration_files
from azync_flow.store.postgres._queries import QUERIES
from azync_flow.testing import drop_schema, unique_schema

ROOT = Path(__file__).resolve().parents[3]  # the repository


async def test_migrate_twice_is_a_noop(store: PostgresStore) -> None:
    versions = [v for v, _, _ in migration_files()]
    recorded = await store.pool.fetch("SELECT version FROM azync_migrations ORDER BY version")
    assert [r["version"] for r in recorded] == versions
    tables = await _tables(store)
    assert await store.migrate() == []
    assert await store.migrate() == []
    assert await _tables(store) == tables
    assert await store.pool.fetchval("SELECT count(*) FROM azync_migrations") == len(versions)


async def _tables(store: PostgresStore) -> list[str]:
    rows = await store.pool.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
        store.schema,
    )
    return [r["table_name"] for r in rows]


async def test_five_processes_migrating_one_schema_all_succeed(pg_dsn: str) -> None:
    schema = unique_schema()
    code = (
        "import asyncio, sys\n"
        "from azync_flow.store import Config\n"
        "from azync_flow.store.postgres import open_store\n"
        "async def main():\n"
        "    s = await open_store(sys.argv[1], Config(schema=sys.argv[2]))\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, pg_dsn, schema, env=env, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(5)
    ]
    try:
        results = await asyncio.gather(*(p.communicate() for p in procs))
        for proc, (_, err) in zip(procs, results, strict=True):
            assert proc.returncode == 0, err.decode()
        s = await open_store(pg_dsn, Config(schema=schema), migrate=False)
        try:
            versions = await s.pool.fetch("SELECT version FROM azync_migrations")
            assert len(versions) == len(migration_files())
            assert await s.migrate() == []
        finally:
            await s.close()
    finally:
        await drop_schema(pg_dsn, schema)


async def test_every_named_query_prepares_against_the_schema(store: PostgresStore) -> None:
    assert QUERIES
    async with store.pool.acquire() as conn:
        for name, sql in QUERIES.items():
            try:
                stmt = await conn.prepare(sql)
            except Exception as exc:
                pytest.fail(f"query {name} does not prepare: {exc}")
            params = stmt.get_parameters()
            assert params, f"query {name} takes no clock parameter"
            assert params[0].name == "timestamptz", f"$1 of {name} is not the clock override"


@pytest.mark.parametrize(
    "config",
    [
        Config(schema="Bad-Schema"),
        Config(schema='x"; DROP TABLE y; --'),
        Config(schema="1starts_with_digit"),
        Config(notify_channel="has space"),
        Config(migrations_table="UPPER"),
        Config(schema="a" * 64),
    ],
    ids=["dash", "injection", "digit", "channel", "table", "too-long"],
)
async def test_bad_config_identifier_raises_value_error(pg_dsn: str, config: Config) -> None:
    with pytest.raises(ValueError, match="invalid"):
        await open_store(pg_dsn, config)


async def test_an_unreachable_dsn_raises_store_error_with_clear_message() -> None:
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL"):
        await open_store("postgresql://nobody@127.0.0.1:1/nowhere", Config(schema=unique_schema()))


async def test_a_malformed_dsn_raises_store_dsn_error_which_is_a_value_error() -> None:
    with pytest.raises(StoreDsnError, match="the driver refused the DSN") as raised:
        await open_store("definitely not a dsn://", Config(schema=unique_schema()))
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, StoreError)


async def test_changed_applied_migration_is_refused(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(pg_dsn, Config(schema=schema))
    try:
        from azync_flow.store.postgres import _migrate

        original = _migrate.migration_files()
        edited = [(v, n, sql + "\n-- edited after release\n") for v, n, sql in original]
        monkeypatch.setattr(_migrate, "migration_files", lambda: edited)
        with pytest.raises(MigrationError, match=r"applied .* with different contents"):
            await store.migrate()
        monkeypatch.setattr(_migrate, "migration_files", lambda: original)
        assert await store.migrate() == []
    finally:
        await store.close()
        await drop_schema(pg_dsn, schema)


async def test_check_schema_passes_on_a_migrated_schema_and_names_what_is_missing(
    store: PostgresStore, pg_dsn: str
) -> None:
    await store.check_schema()
    last_version, last_name, _ = migration_files()[-1]
    await store.pool.execute("DELETE FROM azync_migrations WHERE version = $1", last_version)
    with pytest.raises(SchemaNotMigratedError, match=f"migrations not applied: {last_name}") as e:
        await store.check_schema()
    assert e.value.schema == store.schema
    schema = unique_schema()
    empty = await open_store(pg_dsn, Config(schema=schema), migrate=False)
    try:
        with pytest.raises(SchemaNotMigratedError, match="it has no azync_flow tables"):
            await empty.check_schema()
    finally:
        await empty.close()
        await drop_schema(pg_dsn, schema)


async def test_target_names_the_database_without_its_password_and_the_schema(
    store: PostgresStore, pg_dsn: str
) -> None:
    parts = urlsplit(pg_dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    with_password = urlunsplit(parts._replace(netloc=f"{parts.username}:s3cr3t@{host}"))
    s = await open_store(with_password, Config(schema=store.schema), migrate=False)
    try:
        target = s.target()
    finally:
        await s.close()
    assert "s3cr3t" not in target
    assert target.endswith(f', schema "{store.schema}"')
    assert host in target
