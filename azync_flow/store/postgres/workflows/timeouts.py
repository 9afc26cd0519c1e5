"""Timeouts of executions and operations, enforced by the leader on the
database clock (contract ``WorkflowMaintenance.time_out_workflows`` and
``time_out_operations``).

A deadline is a column (migration 0029), so it survives any worker: whichever
worker leads the maintenance finds the passed ones through partial indexes
that hold only rows carrying a deadline.
"""

from __future__ import annotations

__all__ = ["WorkflowTimeoutsMixin"]

import uuid
from collections.abc import Callable
from datetime import timedelta

import asyncpg

from ...queue import Job
from ...workflows import TimedOutOperation, TimedOutWorkflow, WorkflowState
from .._base import decode_meta, job_from_row
from .core import FAILED, LIVE_WORKFLOW_STATES, WORKFLOW_TASK
from .runtime import WorkflowRuntimeMixin


def workflow_timeout_reason(kind: str, timeout: timedelta) -> str:
    """The failure reason of an execution a timeout ended."""
    return f"WorkflowTimeoutError: {kind} timeout of {timeout.total_seconds():g}s elapsed"


class WorkflowTimeoutsMixin(WorkflowRuntimeMixin):
    async def time_out_workflows(
        self,
        encode: Callable[[str, timedelta], tuple[str, bytes]],
        *,
        limit: int = 100,
    ) -> list[TimedOutWorkflow]:
        """Implements ``WorkflowMaintenance.time_out_workflows`` (documented there)."""
        ended: list[TimedOutWorkflow] = []
        for row in await self._fetch("workflow_timeouts_due", limit):
            try:
                done = await self._time_out_once(row["id"], encode)
            except asyncpg.LockNotAvailableError:
                continue  # a pass or a settle holds one of its jobs: next tick
            if done is not None:
                ended.append(done)
        return ended

    async def _time_out_once(
        self, id: uuid.UUID, encode: Callable[[str, timedelta], tuple[str, bytes]]
    ) -> TimedOutWorkflow | None:
        async with self.transaction() as conn:
            due = await self._fetchrow("workflow_timeout_lock", id, conn=conn)
            if due is None:  # finished, or its run continued as new meanwhile
                return None
            kind, timeout = str(due["kind"]), due["timeout"]
            event = encode(kind, timeout)
            reason = workflow_timeout_reason(kind, timeout)
            # the same end as terminate: jobs cancelled (tokens cleared), timers
            # cancelled, the event appended; then the one terminal transition
            await self._fetch("workflow_terminate_lock_jobs", id, conn=conn)
            done = await self._fetchrow(
                "workflow_terminate",
                id,
                event[0],
                event[1],
                f"cancelled: workflow execution timed out ({kind} timeout)",
                conn=conn,
            )
            await self._finish(conn, id, WorkflowState.FAILED, None, reason)
        return TimedOutWorkflow(
            id=id,
            name=str(due["name"]),
            kind=kind,
            timeout=timeout,
            previous_state=WorkflowState(due["state"]),
            reason=reason,
            created_at=due["created_at"],
            trace_context=decode_meta(done["trace_context"]) if done is not None else {},
        )

    async def time_out_operations(
        self,
        encode: Callable[[Job, str, timedelta], tuple[str, bytes]],
        *,
        limit: int = 100,
    ) -> list[TimedOutOperation]:
        """Implements ``WorkflowMaintenance.time_out_operations`` (documented there)."""
        failed: list[TimedOutOperation] = []
        seen: set[uuid.UUID] = set()
        for due in await self._fetch("workflow_op_deadlines_due", limit):
            if due["id"] in seen:  # both deadlines passed: the first listed wins
                continue
            seen.add(due["id"])
            async with self._wtx() as conn:
                row = await self._fetchrow(
                    "workflow_op_timeout_lock", due["id"], due["kind"], conn=conn
                )
                if row is None:
                    continue
                job, kind, timeout = job_from_row(row), str(due["kind"]), row["timeout"]
                event_type, payload = encode(job, kind, timeout)
                error = (
                    f"ActivityTimeoutError: {kind} timeout of {timeout.total_seconds():g}s elapsed"
                )
                dead_kind = await self._fetchval("workflow_op_time_out", job.id, error, conn=conn)
                self._count(conn, dead_kind, FAILED)
                run_id = row["run_id"]
                ex = await self._fetchrow("workflow_lock", run_id, conn=conn)
                if ex is not None and ex["state"] in LIVE_WORKFLOW_STATES:
                    await self._fetchval(
                        "workflow_history_append", run_id, event_type, payload, conn=conn
                    )
                    if ex["state"] == WorkflowState.RUNNING:
                        await self._schedule_task(conn, run_id, WORKFLOW_TASK, None)
            failed.append(TimedOutOperation(job=job, kind=kind, timeout=timeout))
        return failed
