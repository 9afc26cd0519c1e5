"""The committed schema snapshot (azync_flow/store/postgres/schema.sql) is what
a fresh migrate produces, on every server version the tests run against."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from azync_flow.store.postgres import PostgresStore, schema_dump
from azync_flow.store.postgres._migrate import (
    SNAPSHOT_TABLE,
    _fresh,
    migrate,
    migration_files,
    snapshot_text,
)
from azync_flow.store.postgres.schema_dump import SNAPSHOT, render_schema, snapshot_diff
from azync_flow.testing import unique_schema

REGENERATE = "python -m azync_flow.store.postgres.schema_dump"


async def _rendered_after(pg_dsn: str, *, replay: bool) -> str:
    """Migrate a scratch schema (replaying every migration, or as a fresh
    migrate does: from the snapshot) and render it."""
    schema = unique_schema("snap")
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn, schema, SNAPSHOT_TABLE, replay=replay)
        return await render_schema(conn, schema)
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def test_replaying_every_migration_produces_the_committed_schema_snapshot(
    pg_dsn: str,
) -> None:
    actual = await _rendered_after(pg_dsn, replay=True)
    diff = snapshot_diff(actual, SNAPSHOT.read_text(encoding="utf-8"))
    if diff:
        pytest.fail(
            f"schema.sql differs from replaying the migrations; if the change is intended, "
            f"regenerate it with `{REGENERATE}` and commit it:\n{diff}",
            pytrace=False,
        )


async def test_a_fresh_schema_built_from_the_snapshot_is_the_snapshot(pg_dsn: str) -> None:
    """A fresh migrate loads the snapshot; what it builds renders back to it."""
    assert snapshot_text(migration_files()) is not None  # the snapshot is current: it is used
    actual = await _rendered_after(pg_dsn, replay=False)
    assert snapshot_diff(actual, SNAPSHOT.read_text(encoding="utf-8")) == ""


def test_a_snapshot_rendered_from_other_migrations_is_not_used() -> None:
    files = migration_files()
    assert snapshot_text(files[:-1]) is None
    assert snapshot_text([*files, (9999, "9999_later.sql", "SELECT 1")]) is None


async def test_a_schema_holding_other_objects_is_migrated_by_replay_and_keeps_them(
    pg_dsn: str,
) -> None:
    """Only an empty schema is built from the snapshot; one that holds anything
    (the application's own tables) gets the migrations replayed around it."""
    schema = unique_schema("snap")
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        assert await _fresh(conn, schema)
        await conn.execute(f'CREATE TABLE "{schema}".orders (id int)')
        assert not await _fresh(conn, schema)
        applied = await migrate(conn, schema, SNAPSHOT_TABLE)
        assert applied == [v for v, _, _ in migration_files()]
        assert await conn.fetchval("SELECT to_regclass($1)", f"{schema}.orders") is not None
        assert await render_schema(conn, schema) != SNAPSHOT.read_text(encoding="utf-8")
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def test_a_schema_change_shows_as_a_diff_naming_the_changed_lines(
    store: PostgresStore,
) -> None:
    await store.pool.execute("ALTER TABLE azync_jobs ADD COLUMN example int NOT NULL DEFAULT 0")
    await store.pool.execute("DROP INDEX azync_jobs_uncertain")
    async with store.pool.acquire() as conn:
        actual = await render_schema(conn, store.schema)
    diff = snapshot_diff(actual, SNAPSHOT.read_text(encoding="utf-8"))
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[1:].strip()]
    assert changed == [
        "--- schema.sql (committed)",
        "+++ schema.sql (fresh migrate)",
        "+    example integer DEFAULT 0 NOT NULL,",
        "-CREATE INDEX azync_jobs_uncertain ON azync_jobs USING btree (uncertain_since, id)"
        " WHERE (state = 'uncertain'::text);",
    ]


async def test_the_snapshot_never_names_the_schema_it_was_rendered_from(
    store: PostgresStore,
) -> None:
    async with store.pool.acquire() as conn:
        actual = await render_schema(conn, store.schema)
    assert store.schema not in actual
    assert "SET search_path TO '<schema>'" in actual


async def test_an_object_kind_the_snapshot_cannot_render_is_refused(store: PostgresStore) -> None:
    await store.pool.execute("CREATE DOMAIN azync_positive AS int CHECK (VALUE > 0)")
    async with store.pool.acquire() as conn:
        with pytest.raises(ValueError, match=r"cannot render yet: type azync_positive"):
            await render_schema(conn, store.schema)


def test_the_command_rewrites_the_snapshot_and_check_reports_a_stale_one(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "schema.sql"
    monkeypatch.setattr(schema_dump, "SNAPSHOT", target)
    assert schema_dump.main(["--dsn", pg_dsn]) == 0
    assert target.read_text(encoding="utf-8") == SNAPSHOT.read_text(encoding="utf-8")
    target.write_text(target.read_text(encoding="utf-8").replace(" fillfactor=80", ""))
    capsys.readouterr()
    assert schema_dump.main(["--dsn", pg_dsn, "--check"]) == 1
    out = capsys.readouterr().out
    assert "--- schema.sql (committed)" in out
    assert "+) WITH (autovacuum_analyze_scale_factor=0.02" in out
