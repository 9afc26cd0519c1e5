"""Forward-only numbered migrations, applied under an advisory lock."""

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


async def migrate(conn: asyncpg.Connection, schema: str, table: str) -> list[int]:
    """Apply pending migrations on ``conn`` and return the versions applied.

    Safe to run twice and from several processes at once: the whole run holds
    a transaction-scoped advisory lock keyed by the schema name, and each
    version is recorded in ``table`` in the same transaction as its DDL.
    """
    applied: list[int] = []
    tracking = f'"{schema}"."{table}"'
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_SALT, schema)
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
