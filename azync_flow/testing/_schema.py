"""Isolated schemas: one per test, dropped afterwards."""

from __future__ import annotations

import uuid

__all__ = ["drop_schema", "unique_schema"]


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
    import asyncio

    import asyncpg  # here: the pytest plugin imports this module in every session

    from azync_flow.store.postgres import validate_identifier

    validate_identifier(schema, "schema")
    conn = await asyncpg.connect(dsn)
    try:
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
    finally:
        await conn.close()
