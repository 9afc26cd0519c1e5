"""Test helpers that are part of the product: a movable clock and isolated schemas.

Use them in your own tests::

    clock = MovableClock()
    store = await open_store(dsn, Config(schema=unique_schema()), clock=clock)
    clock.advance(timedelta(days=30))   # every statement now sees the future
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg


class MovableClock:
    """A clock for :func:`azync_flow.store.postgres.open_store` that tests can move.

    Until :meth:`set` or :meth:`advance` is called it returns None, so the
    backend clock rules. ``advance`` starts from the real UTC time.
    """

    def __init__(self) -> None:
        self._now: datetime | None = None

    def __call__(self) -> datetime | None:
        return self._now

    def set(self, when: datetime | None) -> None:
        """Pin the clock to ``when`` (UTC-aware), or None to return to the backend clock."""
        if when is not None and when.tzinfo is None:
            raise ValueError("MovableClock needs a timezone-aware datetime (UTC)")
        self._now = when

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new time."""
        self._now = (self._now or datetime.now(UTC)) + delta
        return self._now


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, safe for ``Config.schema``."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
