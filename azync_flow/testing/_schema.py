"""Isolated schemas: one per test, dropped afterwards."""

from __future__ import annotations

import uuid

__all__ = ["drop_schema", "unique_schema"]


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, safe for ``Config.schema`` (``<prefix>_<16 hex>``)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (nothing happens when it is missing).

    Raises:
        ValueError: ``schema`` is not a safe SQL identifier.
    """
    import asyncpg  # here: the pytest plugin imports this module in every session

    from azync_flow.store.postgres import validate_identifier

    validate_identifier(schema, "schema")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
