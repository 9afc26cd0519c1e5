"""Transactional steps: an operation attempt whose own SQL and recorded outcome
commit in ONE transaction (contract ``TransactionalOperationStore``).

Per attempt, on one pooled connection::

    BEGIN [ISOLATION LEVEL ...]
    workflow_op_transaction_open     the operation active under its token? the
                                     database's default search_path (LOCAL)
    ... the step's statements ...
    workflow_op_transaction_schema   the store's search_path back (LOCAL)
    workflow_pass_commit | workflow_op_complete   the same fenced statements as
                                     the folded / plain paths
    COMMIT

A crash anywhere before COMMIT loses the connection, so PostgreSQL rolls the
step's writes back with the outcome; the operation stays active under the
lost lease and runs again once the lease expires. An attempt that outlived
its lease (frozen, partitioned) meets the outcome statement's fence (the
token changed): NotFoundError, and its writes roll back.
"""

from __future__ import annotations

__all__ = ["OperationTransactionMixin"]

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ...._text import clean_text
from ....errors import NotFoundError
from ...workflows import OperationSettle, PassCommitResult, PassWrite, TransactionIsolation
from .._base import stale_lease
from .._listen import connect_dedicated
from .runtime import WorkflowRuntimeMixin

_ISOLATION = {
    "read_committed": "read_committed",
    "repeatable_read": "repeatable_read",
    "serializable": "serializable",
}


class _PgOperationTransaction:
    """``OperationTransaction`` of the PostgreSQL driver."""

    __slots__ = ("_conn", "_job", "_run", "_store", "_token", "_tx", "done")

    def __init__(
        self,
        store: OperationTransactionMixin,
        conn: asyncpg.Connection,
        tx: Any,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
    ) -> None:
        self._store = store
        self._conn = conn
        self._tx = tx
        self._job = job_id
        self._token = lease_token
        self._run = run_id
        self.done = False

    @property
    def connection(self) -> asyncpg.Connection:
        return self._conn

    async def _store_path(self) -> None:
        await self._store._fetchrow(
            "workflow_op_transaction_schema", f'"{self._store.schema}"', conn=self._conn
        )

    async def complete(self, event_type: str, payload: bytes) -> int:
        self._check_open()
        await self._store_path()
        row = await self._store._fetchrow(
            "workflow_op_complete",
            self._job,
            self._token,
            self._run,
            event_type,
            payload,
            self._store.channel,
            conn=self._conn,
        )
        if row is None:  # the lease was taken while the step ran
            raise NotFoundError(stale_lease(self._job, "operation"))
        await self._commit()
        return 0 if row["seq"] is None else int(row["seq"])

    async def commit_completions(
        self, settle: OperationSettle, write: PassWrite
    ) -> PassCommitResult:
        self._check_open()
        if settle.job_id != self._job or settle.lease_token != self._token:
            raise ValueError("commit_completions settles the transaction's own operation only")
        await self._store_path()
        result = await self._store._commit(
            self._run,
            [(self._job, self._token)],
            False,
            write,
            before=[(settle.event_type, settle.payload)],
            errors=[clean_text(settle.last_error) if settle.dead else None],
            signals_wake=True,
            conn=self._conn,
        )
        await self._commit()
        return result

    def _check_open(self) -> None:
        if self.done:
            raise RuntimeError("the operation transaction is already committed")

    async def _commit(self) -> None:
        self.done = True
        await self._tx.commit()


class OperationTransactionMixin(WorkflowRuntimeMixin):
    _default_search_path: str | None = None

    @asynccontextmanager
    async def operation_transaction(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AsyncIterator[_PgOperationTransaction]:
        """Implements ``TransactionalOperationStore.operation_transaction`` (documented there)."""
        if isolation not in _ISOLATION:
            raise ValueError(f"isolation must be one of {sorted(_ISOLATION)}, got {isolation!r}")
        path = await self._user_search_path()
        async with self.pool.acquire() as conn:
            tx = conn.transaction(isolation=_ISOLATION[isolation])
            await tx.start()
            handle = _PgOperationTransaction(self, conn, tx, job_id, lease_token, run_id)
            try:
                row = await self._fetchrow(
                    "workflow_op_transaction_open", job_id, lease_token, run_id, path, conn=conn
                )
                if row is None:
                    raise NotFoundError(stale_lease(job_id, "operation"))
                yield handle
            finally:
                if not handle.done:
                    handle.done = True
                    # A broken connection is discarded by the pool; the server
                    # has rolled the transaction back already.
                    broken = (asyncpg.InterfaceError, asyncpg.PostgresError, OSError)
                    with contextlib.suppress(*broken):
                        await tx.rollback()

    async def _user_search_path(self) -> str:
        """The search_path a plain connection to the DSN gets (read once)."""
        if self._default_search_path is None:
            conn = await connect_dedicated(self, own_path=False)
            try:
                path = await self._fetchval("store_default_search_path", conn=conn)
            finally:
                await conn.close()
            self._default_search_path = str(path)
        return self._default_search_path
