"""Isolated schemas: one per test, emptied for the next test or dropped.

Creating and migrating a schema costs PostgreSQL far more than emptying one
(a hundred catalog rows written, then deleted again), so a test session keeps
the schemas its tests used: :func:`release_schema` empties a schema whose
objects are exactly those of a freshly migrated one and returns it to this
process's pool, and :func:`take_schema` hands it to the next test. A schema a
test changed (DDL, a function replaced, another migration), filled with many
rows, or still locked by another session is dropped instead. The pool's
schemas are dropped at the end of the session (:func:`drop_pooled`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncpg

__all__ = ["drop_pooled", "drop_schema", "release_schema", "take_schema", "unique_schema"]


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, safe for ``Config.schema`` (``<prefix>_<16 hex>``)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


#: Sessions still holding locks in a schema being dropped (a worker process
#: killed by a test, whose backend has not noticed yet): ended before a retry.
_TERMINATE_HOLDERS = """
SELECT pg_terminate_backend(l.pid)
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND l.pid <> pg_backend_pid()
"""

#: Attempts of the DROP before the error is raised.
_DROP_ATTEMPTS = 5


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (nothing happens when it is missing).

    A session still working in the schema (e.g. of a worker process a test
    killed) can make the drop wait or deadlock: the drop then ends the
    sessions holding locks in that schema and tries again, up to 5 times.

    Raises:
        ValueError: ``schema`` is not a safe SQL identifier.
        asyncpg.PostgresError: the schema could still not be dropped.
    """
    import asyncpg  # here: the pytest plugin imports this module in every session

    from azync_flow.store.postgres import validate_identifier

    validate_identifier(schema, "schema")
    conn = await asyncpg.connect(dsn)
    try:
        await _drop(conn, schema)
    finally:
        await conn.close()


async def _drop(conn: asyncpg.Connection, schema: str) -> None:
    import asyncio

    import asyncpg

    await conn.execute("SET lock_timeout = '2s'")
    for attempt in range(1, _DROP_ATTEMPTS + 1):
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            return
        except (asyncpg.DeadlockDetectedError, asyncpg.LockNotAvailableError):
            if attempt == _DROP_ATTEMPTS:
                raise
            await conn.execute(_TERMINATE_HOLDERS, schema)
            await asyncio.sleep(0.1 * attempt)


#: What a schema is made of, without its name or object ids: every object in
#: it (tables, sequences, functions, types), every object on its tables
#: (columns' defaults, indexes, constraints, triggers), each function's body
#: and settings, and the migrations recorded. Read through pg_depend's index,
#: never a scan of the catalogs. NULL when the schema does not exist.
_SHAPE = """
WITH ns AS (
    SELECT oid FROM pg_namespace WHERE nspname = $1
), own AS (
    SELECT d.classid, d.objid, d.objsubid FROM pg_depend d, ns
    WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = ns.oid
), sub AS (
    SELECT d.classid, d.objid, d.objsubid FROM pg_depend d
    WHERE d.refclassid = 'pg_class'::regclass
      AND d.refobjid IN (SELECT objid FROM own WHERE classid = 'pg_class'::regclass)
), objects AS (
    SELECT classid, objid, objsubid FROM own UNION SELECT classid, objid, objsubid FROM sub
)
SELECT md5(string_agg(x.d, '|' ORDER BY x.d)),
       array_agg(x.objid) FILTER (WHERE x.relkind = 'r'),
       array_agg(x.objid) FILTER (WHERE x.relkind = 'S'),
       array_agg(x.relname) FILTER (WHERE x.relkind = 'r'),
       array_agg(x.relname) FILTER (WHERE x.relkind = 'S')
FROM (
    SELECT replace(pg_describe_object(o.classid, o.objid, o.objsubid)
                   || coalesce(p.prosrc, '') || coalesce(array_to_string(p.proconfig, ','), ''),
                   $1, '') AS d,
           o.objid, c.relkind, c.relname::text AS relname
    FROM objects o
    LEFT JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND p.oid = o.objid
    LEFT JOIN pg_class c ON o.classid = 'pg_class'::regclass AND c.oid = o.objid
    WHERE c.relkind IS DISTINCT FROM 't'  -- toast tables are named by oid
) x
WHERE EXISTS (SELECT 1 FROM ns)
"""

#: A pooled schema's tables with their indexes may take at most this many
#: bytes (a migrated schema takes about 1 MiB): a table a test filled keeps
#: its bloat and statistics, which the next test should not inherit.
_MAX_BYTES = 4 * 1024 * 1024


class _Pool:
    """This process's emptied schemas and the shape a migrated one has."""

    def __init__(self) -> None:
        self.idle: list[str] = []
        self.used: set[str] = set()
        self.dsn: str | None = None
        self.reference: str | None = None
        self.reference_migrations: int | None = None


_POOL = _Pool()


def take_schema() -> str:
    """A schema name for a test: an emptied migrated schema of this session's
    pool when one is idle (the test's store then finds it migrated), else a
    fresh name (:func:`unique_schema`)."""
    if _POOL.idle:
        return _POOL.idle.pop()
    return unique_schema()


async def release_schema(dsn: str, schema: str) -> None:
    """Return a test's ``schema`` to the pool, emptied, or drop it.

    The schema is kept only when its objects are exactly those of a schema
    the pool migrated itself (the reference), every migration is
    recorded, its tables and indexes take at most 4 MiB, no other
    session holds a lock in it and the role may disable triggers for the
    emptying (``session_replication_role``). Then every table but the
    migrations' is emptied, sequences restart and table statistics are reset,
    in one transaction. Anything else drops the schema (:func:`drop_schema`).

    Raises:
        ValueError: ``schema`` is not a safe SQL identifier.
        asyncpg.PostgresError: the schema could not be dropped.
    """
    import asyncpg

    from azync_flow.store.postgres import validate_identifier

    validate_identifier(schema, "schema")
    conn = await asyncpg.connect(dsn)
    try:
        if _POOL.dsn is None:
            _POOL.dsn = dsn
        try:
            kept = dsn == _POOL.dsn and await _empty(conn, schema)
        except asyncpg.PostgresError:
            kept = False
        if kept:
            _POOL.used.add(schema)
            _POOL.idle.append(schema)
        else:
            _POOL.used.discard(schema)
            await _drop(conn, schema)
    finally:
        await conn.close()


async def _empty(conn: asyncpg.Connection, schema: str) -> bool:
    """Empty ``schema`` if it may be pooled (see :func:`release_schema`)."""
    shape = await conn.fetchrow(_SHAPE, schema)
    if shape is None or shape[0] is None:
        return False
    tables, sequences = list(shape[1] or []), list(shape[2] or [])
    if _POOL.reference is None:
        await _learn_reference(conn)
    # the reference's shape includes azync_migrations, so the count can be read
    if shape[0] != _POOL.reference or (
        await _migrations(conn, schema) != _POOL.reference_migrations
    ):
        return False
    size = await conn.fetchval(
        "SELECT coalesce(sum(pg_total_relation_size(t)), 0) FROM unnest($1::oid[]) AS t", tables
    )
    if size > _MAX_BYTES:
        return False
    holders = await conn.fetchval(
        "SELECT count(*) FROM pg_locks l WHERE l.relation = ANY($1::oid[])"
        " AND l.pid <> pg_backend_pid()",
        tables + sequences,
    )
    if holders:
        return False
    # one round trip: a multi-statement string (the names come from the catalog)
    emptying = [
        f'DELETE FROM "{schema}"."{name}";' for name in shape[3] or [] if name != "azync_migrations"
    ] + [f'ALTER SEQUENCE "{schema}"."{name}" RESTART;' for name in shape[4] or []]
    async with conn.transaction():
        await conn.execute(
            "SET LOCAL session_replication_role = replica; SET LOCAL lock_timeout = '1s';"
            + "".join(emptying)
        )
        await conn.execute(
            "SELECT pg_stat_reset_single_table_counters(t) FROM unnest($1::oid[]) AS t", tables
        )
    return True


async def _learn_reference(conn: asyncpg.Connection) -> None:
    """Migrate a schema of the pool's own, record its shape as the reference
    and keep it idle for the next test."""
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store

    dsn = _POOL.dsn
    assert dsn is not None
    schema = unique_schema()
    store = await open_store(dsn, Config(schema=schema))
    await store.close()
    _POOL.used.add(schema)
    shape = await conn.fetchrow(_SHAPE, schema)
    _POOL.reference = shape[0]
    _POOL.reference_migrations = await _migrations(conn, schema)
    _POOL.idle.append(schema)


async def _migrations(conn: asyncpg.Connection, schema: str) -> int:
    return int(await conn.fetchval(f'SELECT count(*) FROM "{schema}".azync_migrations'))


async def drop_pooled() -> None:
    """Drop every schema this process pooled (the end of a test session).

    Raises:
        asyncpg.PostgresError: a schema could not be dropped.
    """
    if _POOL.dsn is None or not _POOL.used:
        return
    import asyncpg

    conn = await asyncpg.connect(_POOL.dsn)
    try:
        for schema in sorted(_POOL.used):
            await _drop(conn, schema)
    finally:
        await conn.close()
    _POOL.used.clear()
    _POOL.idle.clear()
