"""Forward-only numbered migrations, applied under an advisory lock.

A fresh schema is built from the bundled snapshot (``schema.sql``, what
replaying every migration produces, checked by a test) in one statement
instead of replaying the migrations one by one, when the snapshot was
rendered from exactly the bundled migrations; an existing schema is upgraded
by replaying the migrations it lacks.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import asyncpg

from ...errors import MigrationError

_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Arbitrary constant: namespaces the migration lock away from user locks.
_LOCK_SALT = 0x417A796E


def migration_files() -> list[tuple[int, str, str]]:
    """Return ``(version, filename, sql)`` for every bundled migration, in order."""
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    # Numbers are reserved per change, so one may land before a lower one:
    # gaps are allowed, a number used twice is not.
    if len(set(versions)) != len(versions):
        raise MigrationError(f"migration numbers must be unique, got {versions}")
    return found


async def migrate(
    conn: asyncpg.Connection, schema: str, table: str, *, replay: bool = False
) -> list[int]:
    """Apply pending migrations on ``conn`` and return the versions applied.

    Safe to run twice and from several processes at once: the whole run holds
    a transaction-scoped advisory lock keyed by the schema name, and each
    version is recorded in ``table`` in the same transaction as its DDL.

    Args:
        conn: a connection (the migration runs in one transaction on it).
        schema: the schema to migrate (created when missing).
        table: the version-tracking table.
        replay: replay every migration even on a fresh schema (the snapshot
            is not used; how the snapshot itself is rendered).

    Raises:
        MigrationError: a migration fails, or an applied one changed.
    """
    applied: list[int] = []
    tracking = f'"{schema}"."{table}"'
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_SALT, schema)
        if not replay and table == SNAPSHOT_TABLE and await _fresh(conn, schema):
            from_snapshot = await _load_snapshot(conn, schema, table)
            if from_snapshot is not None:
                return from_snapshot
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {tracking} ("
            "version int PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(f"ALTER TABLE {tracking} ADD COLUMN IF NOT EXISTS checksum text")
        done = {r[0]: r[1] for r in await conn.fetch(f"SELECT version, checksum FROM {tracking}")}
        for version, name, sql in migration_files():
            checksum = hashlib.sha256(sql.encode()).hexdigest()
            if version in done:
                _check_unchanged(name, done[version], checksum, schema)
                continue
            await conn.execute(f'SET LOCAL search_path TO "{schema}"')
            try:
                await conn.execute(sql)
            except asyncpg.PostgresError as exc:
                raise MigrationError(f"migration {name} failed: {exc}") from exc
            await conn.execute(
                f"INSERT INTO {tracking} (version, name, checksum) VALUES ($1, $2, $3)",
                version,
                name,
                checksum,
            )
            applied.append(version)
    return applied


#: The tracking table the snapshot holds (a store configured with another
#: name replays its migrations).
SNAPSHOT_TABLE = "azync_migrations"
#: Where the snapshot puts the schema's name (functions pin their search_path).
_PLACEHOLDER = "<schema>"
_APPLIED = re.compile(r"^--   (\d{4}_[a-z0-9_]+\.sql)$", re.M)


async def _fresh(conn: asyncpg.Connection, schema: str) -> bool:
    """True when ``schema`` is missing or holds no relation, function or type."""
    return bool(
        await conn.fetchval(
            """
            SELECT NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n
                               ON n.oid = c.relnamespace WHERE n.nspname = $1)
               AND NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n
                               ON n.oid = p.pronamespace WHERE n.nspname = $1)
               AND NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n
                               ON n.oid = t.typnamespace WHERE n.nspname = $1)
            """,
            schema,
        )
    )


def snapshot_text(files: list[tuple[int, str, str]]) -> str | None:
    """The bundled snapshot when it was rendered from exactly ``files`` (by
    name, in order), else None (a stale snapshot is never used)."""
    path = resources.files(__package__).joinpath("schema.sql")
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    return text if _APPLIED.findall(text) == [name for _, name, _ in files] else None


def _functions_before_indexes(text: str) -> str:
    """The snapshot with its functions created before its indexes (after the
    tables whose row types they use), since an expression index may call one."""
    marks = ("\n-- Indexes\n", "\n-- Functions\n", "\n-- Triggers\n")
    if not all(m in text for m in marks):
        return text
    i, f, t = (text.index(m) for m in marks)
    if not i < f < t:
        return text
    return text[:i] + text[f:t] + text[i:f] + text[t:]


async def _load_snapshot(conn: asyncpg.Connection, schema: str, table: str) -> list[int] | None:
    """Build a fresh ``schema`` from the snapshot and record every bundled
    migration as applied; None (nothing done) when the snapshot is stale."""
    files = migration_files()
    text = snapshot_text(files)
    if text is None:
        return None
    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    await conn.execute(f'SET LOCAL search_path TO "{schema}"')
    try:
        await conn.execute(_functions_before_indexes(text).replace(_PLACEHOLDER, schema))
    except asyncpg.PostgresError as exc:
        raise MigrationError(f"the schema snapshot failed to load: {exc}") from exc
    await conn.executemany(
        f'INSERT INTO "{schema}"."{table}" (version, name, checksum) VALUES ($1, $2, $3)',
        [(v, name, hashlib.sha256(sql.encode()).hexdigest()) for v, name, sql in files],
    )
    return [v for v, _, _ in files]


async def pending_migrations(conn: asyncpg.Connection, schema: str, table: str) -> list[str] | None:
    """Bundled migrations not yet applied to ``schema`` (file names, in order).

    Returns None when the schema has no migrations table at all (never migrated).
    """
    tracking = f'"{schema}"."{table}"'
    if await conn.fetchval("SELECT to_regclass($1)", tracking) is None:
        return None
    done = {r[0] for r in await conn.fetch(f"SELECT version FROM {tracking}")}
    return [name for version, name, _ in migration_files() if version not in done]


def _check_unchanged(name: str, recorded: str | None, checksum: str, schema: str) -> None:
    """Refuse to run against a schema migrated with a different text of ``name``.

    Migrations are forward-only: editing an applied one would leave databases
    that ran the old text silently without the change. Rows recorded before
    checksums existed (NULL) are trusted.
    """
    if recorded is not None and recorded != checksum:
        raise MigrationError(
            f"migration {name} was applied to schema {schema!r} with different contents; "
            "applied migrations must never change. Add the change as a new numbered "
            "migration, or migrate a fresh schema."
        )
