"""The transaction of a transactional step (a workflow operation or an event
delivery): the step's own statements and the statement settling it, on one
pooled connection, committed once.

::

    BEGIN [ISOLATION LEVEL ...]
    <entity>_transaction_open   the job active under its token? the database's
                                default search_path (LOCAL)
    ... the step's statements ...
    store_search_path_set       the store's search_path back (LOCAL)
    <the settling statement>    fenced by the lease token again
    COMMIT

A crash anywhere before COMMIT loses the connection, so PostgreSQL rolls the
step's writes back with the settlement; the job stays active under the lost
lease and runs again once the lease expires. An attempt that outlived its
lease (frozen, partitioned) meets the settling statement's fence (the token
changed): NotFoundError, and its writes roll back.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

from ...errors import NotFoundError
from ._base import PgBase, stale_lease
from ._listen import connect_dedicated

__all__ = ["ISOLATION_LEVELS", "PgStepTransaction", "open_step_transaction"]

#: The isolation levels a step may ask for (asyncpg's names).
ISOLATION_LEVELS = frozenset({"read_committed", "repeatable_read", "serializable"})

#: The search_path a plain connection to each DSN gets (read once per DSN).
_DEFAULT_PATHS: dict[str, str] = {}


class PgStepTransaction:
    """The open transaction of one step; subclasses add the settling verb."""

    def __init__(self, store: PgBase, conn: asyncpg.Connection, tx: Any) -> None:
        self._store = store
        self._conn = conn
        self._tx = tx
        self.done = False

    @property
    def connection(self) -> asyncpg.Connection:
        """The connection the step's statements run on."""
        return self._conn

    async def _settling(self) -> None:
        """Before the settling statement: still open, and the store's search_path back."""
        if self.done:
            raise RuntimeError("the step's transaction is already committed")
        await self._store._fetchrow(
            "store_search_path_set", f'"{self._store.schema}"', conn=self._conn
        )

    async def _commit(self) -> None:
        self.done = True
        await self._tx.commit()


T = TypeVar("T", bound=PgStepTransaction)


@asynccontextmanager
async def open_step_transaction(
    store: PgBase,
    open_query: str,
    job_id: uuid.UUID,
    args: tuple[Any, ...],
    isolation: str,
    make: Callable[[asyncpg.Connection, Any], T],
    what: str,
) -> AsyncIterator[T]:
    """BEGIN, check the job under its token with ``open_query`` (``args``, then
    the search_path), and yield the handle ``make(conn, tx)``; roll back on
    leaving without its settling verb.

    Raises:
        ValueError: an unknown isolation level.
        NotFoundError: the job is not active under the token.
    """
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation must be one of {sorted(ISOLATION_LEVELS)}, got {isolation!r}")
    path = await default_search_path(store)
    async with store.pool.acquire() as conn:
        tx = conn.transaction(isolation=isolation)
        await tx.start()
        handle = make(conn, tx)
        try:
            if await store._fetchrow(open_query, *args, path, conn=conn) is None:
                raise NotFoundError(stale_lease(job_id, what))
            yield handle
        finally:
            if not handle.done:
                handle.done = True
                # A broken connection is discarded by the pool; the server has
                # rolled the transaction back already.
                broken = (asyncpg.InterfaceError, asyncpg.PostgresError, OSError)
                with contextlib.suppress(*broken):
                    await tx.rollback()


async def default_search_path(store: PgBase) -> str:
    """The search_path a plain connection to the store's DSN gets (the
    application's, read once per DSN on a connection opened without ours)."""
    path = _DEFAULT_PATHS.get(store.dsn)
    if path is None:
        conn = await connect_dedicated(store, own_path=False)
        try:
            path = str(await store._fetchval("store_default_search_path", conn=conn))
        finally:
            await conn.close()
        _DEFAULT_PATHS[store.dsn] = path
    return path
