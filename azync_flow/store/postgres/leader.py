"""Leader election on session-level advisory locks (contracts ``LeaderElector``,
``LeaseElector``).

Each leadership is a ``pg_try_advisory_lock`` held by a dedicated connection
outside the pool, keyed by a 64-bit hash of ``"<schema>/<name>"`` so stores on
different schemas never contend. The lock lives exactly as long as that
session: when the connection dies (crash, ``pg_terminate_backend``, network
loss) Postgres frees the lock and another instance can take it, and
:meth:`PgLeadershipLease.valid` reports False from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncpg

from ._base import PgBase
from ._guard import translate
from .notify import connect_dedicated

#: Bound on the liveness ping of ``valid()`` (seconds).
VALID_TIMEOUT = 2.0
_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)


class PgLeadershipLease:
    """A held leadership: the advisory lock and the session that holds it."""

    def __init__(self, conn: asyncpg.Connection, key: int, name: str) -> None:
        self._conn: asyncpg.Connection | None = conn
        self._key = key
        self.name = name
        self._lock = asyncio.Lock()

    async def valid(self) -> bool:
        """Ping the session holding the lock; False once it is lost (sticky).

        A cheap check meant for once per scheduler tick, bounded by
        :data:`VALID_TIMEOUT` seconds.
        """
        async with self._lock:
            conn = self._conn
            if conn is None or conn.is_closed():
                self._drop()
                return False
            try:
                await conn.fetchval("SELECT 1", timeout=VALID_TIMEOUT)
            except Exception:  # any failure of the session means the lock may be gone
                self._drop()
                return False
            return True

    async def release(self) -> None:
        """Unlock and close the session. Idempotent; never raises."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is None or conn.is_closed():
                return
            with contextlib.suppress(*_ERRORS):
                await conn.execute("SELECT pg_advisory_unlock($1)", self._key)
            with contextlib.suppress(*_ERRORS):
                await asyncio.wait_for(conn.close(), VALID_TIMEOUT)
            if not conn.is_closed():
                conn.terminate()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()


class LeaderMixin(PgBase):
    async def acquire_leadership_lease(self, name: str) -> PgLeadershipLease | None:
        """Contract ``LeaseElector.AcquireLeadershipLease``.

        Returns:
            The lease when acquired, None when another instance leads.

        Raises:
            StoreUnavailableError: the database cannot be reached right now.
            StoreError: the dedicated connection cannot be opened.
        """
        conn = await connect_dedicated(self)
        try:
            key = await conn.fetchval("SELECT hashtextextended($1, 0)", f"{self.schema}/{name}")
            got = await conn.fetchval("SELECT pg_try_advisory_lock($1)", key)
        except BaseException as exc:
            conn.terminate()
            if (err := translate(exc, self.schema)) is not None:
                raise err from exc
            raise
        if not got:
            await conn.close()
            return None
        return PgLeadershipLease(conn, key, name)

    async def acquire_leadership(self, name: str) -> Callable[[], Awaitable[None]] | None:
        """Contract ``LeaderElector.AcquireLeadership``.

        Returns:
            An async ``release`` callable when acquired, None when another
            instance leads.
        """
        lease = await self.acquire_leadership_lease(name)
        return None if lease is None else lease.release
