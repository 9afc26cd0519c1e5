"""Transactional workflow steps: an operation attempt whose own SQL and
recorded outcome commit in ONE transaction (contract
``TransactionalOperationStore``; the transaction itself: ``.._steptx``).

The settling statement is the one the plain or folded path runs
(``workflow_op_complete`` / ``workflow_pass_commit``), on the step's connection.
"""

from __future__ import annotations

__all__ = ["OperationTransactionMixin"]

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ...._text import clean_text
from ....errors import NotFoundError
from ...workflows import OperationSettle, PassCommitResult, PassWrite, TransactionIsolation
from .._base import stale_lease
from .._steptx import PgStepTransaction, open_step_transaction
from .runtime import WorkflowRuntimeMixin


class _PgOperationTransaction(PgStepTransaction):
    """``OperationTransaction`` of the PostgreSQL driver."""

    def __init__(
        self,
        store: OperationTransactionMixin,
        conn: asyncpg.Connection,
        tx: Any,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
    ) -> None:
        super().__init__(store, conn, tx)
        self._wf = store
        self._job = job_id
        self._token = lease_token
        self._run = run_id

    async def complete(self, event_type: str, payload: bytes) -> int:
        await self._settling()
        row = await self._wf._fetchrow(
            "workflow_op_complete",
            self._job,
            self._token,
            self._run,
            event_type,
            payload,
            self._wf.channel,
            conn=self._conn,
        )
        if row is None:  # the lease was taken while the step ran
            raise NotFoundError(stale_lease(self._job, "operation"))
        await self._commit()
        return 0 if row["seq"] is None else int(row["seq"])

    async def commit_completions(
        self, settle: OperationSettle, write: PassWrite
    ) -> PassCommitResult:
        if settle.job_id != self._job or settle.lease_token != self._token:
            raise ValueError("commit_completions settles the transaction's own operation only")
        await self._settling()
        result = await self._wf._commit(
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


class OperationTransactionMixin(WorkflowRuntimeMixin):
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

        def make(conn: asyncpg.Connection, tx: Any) -> _PgOperationTransaction:
            return _PgOperationTransaction(self, conn, tx, job_id, lease_token, run_id)

        async with open_step_transaction(
            self,
            "workflow_op_transaction_open",
            job_id,
            (job_id, lease_token, run_id),
            isolation,
            make,
            "operation",
        ) as handle:
            yield handle
