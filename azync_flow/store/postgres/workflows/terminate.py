"""``terminate_workflow``: end any live execution at once, without its code.

The operator's verb for a run that cannot or should not finish by itself (its
workflow is registered by no worker, it waits on something that will never
come). ``cancel`` stays the cooperative verb: it asks the code to clean up.
"""

from __future__ import annotations

__all__ = [
    "WORKFLOW_TERMINATED_EVENT",
    "WorkflowTerminateMixin",
]

import asyncio
import uuid

import asyncpg
import msgspec

from ...._text import clean_text
from ....errors import ConflictError
from ...workflows import TerminatedExecution, WorkflowState
from .._base import decode_meta, encode_meta
from .core import WorkflowCoreMixin

#: Lock attempts before giving up (backoff 2 ms doubling to 100 ms: about 5 s).
_LOCK_ATTEMPTS = 55

#: Ledger event type published by :meth:`WorkflowTerminateMixin.terminate_workflow`.
WORKFLOW_TERMINATED_EVENT = "azync.workflow.terminated"


class _LedgerBody(msgspec.Struct):
    workflow_id: uuid.UUID
    name: str
    reason: str
    terminated_by: str
    previous_state: str
    cancelled_operations: list[str]
    cancelled_timers: list[int]


class WorkflowTerminateMixin(WorkflowCoreMixin):
    async def terminate_workflow(
        self,
        id: uuid.UUID,
        reason: str,
        terminated_by: str,
        event: tuple[str, bytes],
    ) -> TerminatedExecution:
        """End a running or suspended execution now, in one transaction, without
        running workflow code.

        The execution becomes ``terminated`` (``failure_reason`` =
        ``terminated by <terminated_by>: <reason>``); ``event`` (the encoded
        ``WorkflowTerminated`` history event) is appended at its next seq; its
        pending, scheduled, leased, paused and uncertain jobs (workflow tasks
        and operations) are cancelled with their lease tokens cleared, so a
        worker still holding one loses its fence (its pass commit or activity
        completion writes nothing); its unfired timers are cancelled; signals
        it never consumed are recorded undelivered after that event (the
        terminal transition every finishing verb shares); one
        ``azync.workflow.terminated`` ledger event is published (payload:
        ``workflow_id``, ``name``, ``reason``, ``terminated_by``,
        ``previous_state``, ``cancelled_operations``, ``cancelled_timers``;
        meta: the run's trace context) and ``result()`` waiters are woken.

        Args:
            id: the execution.
            reason: why (free text, kept in history, on the row and the ledger).
            terminated_by: who (free text, e.g. ``user@host``).
            event: ``(type, payload)`` of the terminal history event.

        Returns:
            A :class:`TerminatedExecution`.

        Raises:
            NotFoundError: the execution is missing or already finished
                (succeeded, failed, cancelled or terminated); nothing written.
            ConflictError: its jobs stayed locked by other transactions for
                every attempt (about 5 s); nothing written, retry.
        """
        reason, terminated_by = clean_text(reason), clean_text(terminated_by)
        pause = 0.002
        for _ in range(_LOCK_ATTEMPTS):
            try:
                return await self._terminate_once(id, reason, terminated_by, event)
            except asyncpg.LockNotAvailableError:
                # a job of the run is held by a transaction that needs the run's
                # row next (a pass or an activity settling): let it finish
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.1)
        raise ConflictError(
            f"workflow execution {id}: its jobs stayed locked by other transactions "
            f"through {_LOCK_ATTEMPTS} attempts; not terminated, retry"
        )

    async def complete_workflow(
        self, id: uuid.UUID, result: bytes, closed_by: str, event: tuple[str, bytes]
    ) -> None:
        """Contract ``CompleteWorkflow`` (documented at
        :meth:`~azync_flow.store.workflows.WorkflowAdmin.complete_workflow`)."""
        await self._close_by_operator(id, WorkflowState.SUCCEEDED, result, "", closed_by, event)

    async def fail_workflow(
        self, id: uuid.UUID, reason: str, closed_by: str, event: tuple[str, bytes]
    ) -> None:
        """Contract ``FailWorkflow`` (documented at
        :meth:`~azync_flow.store.workflows.WorkflowAdmin.fail_workflow`)."""
        why = f"failed by {clean_text(closed_by)}: {clean_text(reason)}"
        await self._close_by_operator(id, WorkflowState.FAILED, None, why, closed_by, event)

    async def _close_by_operator(
        self,
        id: uuid.UUID,
        state: WorkflowState,
        result: bytes | None,
        failure_reason: str,
        closed_by: str,
        event: tuple[str, bytes],
    ) -> None:
        """Terminate's transaction (event, jobs and timers cancelled, waiters
        woken) ending in ``state`` instead, without a ledger event."""
        closed_by = clean_text(closed_by)
        pause = 0.002
        for _ in range(_LOCK_ATTEMPTS):
            try:
                async with self.transaction() as conn:
                    await self._lock_live(conn, id, f"close it as {state}")
                    await self._fetch("workflow_terminate_lock_jobs", id, conn=conn)
                    await self._fetchrow(
                        "workflow_terminate",
                        id,
                        event[0],
                        event[1],
                        f"cancelled: workflow execution closed as {state} by {closed_by}",
                        conn=conn,
                    )
                    await self._finish(conn, id, state, result, failure_reason)
                return
            except asyncpg.LockNotAvailableError:
                await asyncio.sleep(pause)  # a pass or activity settling: let it finish
                pause = min(pause * 2, 0.1)
        raise ConflictError(
            f"workflow execution {id}: its jobs stayed locked by other transactions "
            f"through {_LOCK_ATTEMPTS} attempts; not closed, retry"
        )

    async def _terminate_once(
        self, id: uuid.UUID, reason: str, terminated_by: str, event: tuple[str, bytes]
    ) -> TerminatedExecution:
        async with self.transaction() as conn:
            state = await self._lock_live(conn, id, "terminate")
            await self._fetch("workflow_terminate_lock_jobs", id, conn=conn)
            done = await self._fetchrow(
                "workflow_terminate",
                id,
                event[0],
                event[1],
                f"cancelled: workflow execution terminated by {terminated_by}: {reason}",
                conn=conn,
            )
            assert done is not None, "locked live execution was not terminated"
            # The one terminal transition: state, undelivered signals, waiters.
            undelivered = await self._finish(
                conn,
                id,
                WorkflowState.TERMINATED,
                None,
                f"terminated by {terminated_by}: {reason}",
            )
            trace = decode_meta(done["trace_context"])
            body = _LedgerBody(
                workflow_id=id,
                name=done["name"],
                reason=reason,
                terminated_by=terminated_by,
                previous_state=state,
                cancelled_operations=list(done["operations"]),
                cancelled_timers=list(done["timers"]),
            )
            await self._fetchrow(
                "event_publish",
                uuid.uuid4(),
                WORKFLOW_TERMINATED_EVENT,
                "workflow",
                str(id),
                0,
                None,
                msgspec.json.encode(body),
                encode_meta(trace),
                self.channel,
                conn=conn,
            )
        return TerminatedExecution(
            seq=int(done["seq"]),
            previous_state=WorkflowState(state),
            operations=body.cancelled_operations,
            workflow_tasks=int(done["tasks"]),
            timers=body.cancelled_timers,
            signals_undelivered=undelivered,
            trace_context=trace,
        )
