"""Lease-expiry reaping for workflow jobs (the workflow-source counterpart of
contract ``ReapExpired``), run by the leader.

- A workflow task whose lease expired returns to pending (merged into a
  runnable sibling if one exists); after ``max_reaps`` expiries the pass is
  treated as poison: the task is dead-lettered and the execution suspended
  with the reason, so it is visible and resumable rather than looping.
- An idempotent operation returns to pending (or scheduled after the
  runtime's retry backoff); after ``max_reaps`` expiries it
  is dead-lettered AND its failure event appended with a workflow task
  scheduled (one transaction), so the workflow sees the failure instead of
  waiting forever.
- Non-idempotent operations are never re-queued: see
  ``reap_uncertain_operations``.
"""

from __future__ import annotations

__all__ = [
    "LOST_ATTEMPT",
    "WorkflowReaperMixin",
]

import uuid
from collections.abc import Callable
from datetime import timedelta

from ...queue import Job, ReapReport
from .._base import job_from_row
from .runtime import WorkflowRuntimeMixin

#: The failure-history line of an attempt whose lease the reaper reclaimed.
LOST_ATTEMPT = "lease expired: the attempt was lost (worker died or stalled); run again"


class WorkflowReaperMixin(WorkflowRuntimeMixin):
    async def reap_workflow_tasks(
        self,
        max_reaps: int = 5,
        *,
        limit: int = 100,
        on_reaped: Callable[[Job], None] | None = None,
    ) -> ReapReport:
        """Implements ``WorkflowMaintenance.reap_workflow_tasks`` (documented there)."""
        reaped = killed = 0
        for job_id in await self._expired(True, limit):
            async with self._wtx() as conn:
                row = await self._fetchrow("workflow_lock_expired", job_id, conn=conn)
                if row is None:
                    continue
                if 0 < max_reaps <= row["reap_count"] + 1:
                    why = (
                        f"workflow task {job_id} lost its lease {row['reap_count'] + 1} times "
                        "(a pass keeps crashing or stalling its worker); fix and resume"
                    )
                    token = row["lease_token"]
                    await self._settle_job(conn, job_id, token, dead=True, last_error=why)
                    await self._fetchrow("workflow_lock", row["run_id"], conn=conn)
                    await self._suspend(conn, row["run_id"], why)
                    await self._lost(conn, row, None)
                    killed += 1
                else:
                    await self._fetchrow("workflow_job_reap", job_id, None, conn=conn)
                    await self._lost(conn, row, LOST_ATTEMPT)
                    reaped += 1
            if on_reaped is not None:
                on_reaped(job_from_row(row))
        return ReapReport(reaped, killed)

    async def reap_expired_operations(
        self,
        encode_failed: Callable[[Job, str], tuple[str, bytes]],
        max_reaps: int = 5,
        *,
        limit: int = 100,
        on_reaped: Callable[[Job], None] | None = None,
        retry_delay: Callable[[Job], timedelta] | None = None,
        give_up: Callable[[Job], bool] | None = None,
    ) -> ReapReport:
        """Reclaim idempotent operations whose lease expired (backend clock).

        Each returns to pending with ``reap_count`` + 1 (its attempt kept, so
        the next lease is attempt + 1) — or, with ``retry_delay(job)`` (the
        runtime's backoff for the lost attempt), to scheduled that much later;
        once ``reap_count`` would reach ``max_reaps`` (> 0) the operation is
        dead-lettered and ``encode_failed(job, reason)`` — the runtime's
        ActivityFailed event ``(type, payload)`` — appended with a workflow
        task scheduled, in one transaction (as ``complete_operation(dead=True)``),
        also when ``give_up(job)`` is true (its retry budget is spent).
        Operations with meta ``idempotent="false"`` are skipped (they turn
        uncertain instead). ``on_reaped(job)`` is called after each commit.
        """
        reaped = killed = 0
        for job_id in await self._expired(False, limit):
            async with self._wtx() as conn:
                row = await self._fetchrow("workflow_lock_expired", job_id, conn=conn)
                if row is None:
                    continue
                spent = give_up is not None and give_up(job_from_row(row))
                if spent or 0 < max_reaps <= row["reap_count"] + 1:
                    why = (
                        f"lease expired on attempt {row['attempt']}; the retry budget is spent"
                        if spent
                        else f"lease expired {row['reap_count'] + 1} times; giving up"
                    )
                    event_type, payload = encode_failed(job_from_row(row), why)
                    await self._settle_op(
                        conn,
                        job_id,
                        row["lease_token"],
                        row["run_id"],
                        event_type,
                        payload,
                        True,
                        why,
                    )
                    await self._lost(conn, row, None)
                    killed += 1
                else:
                    delay = None if retry_delay is None else retry_delay(job_from_row(row))
                    await self._fetchrow("workflow_job_reap", job_id, delay, conn=conn)
                    await self._lost(conn, row, LOST_ATTEMPT)
                    reaped += 1
            if on_reaped is not None:
                on_reaped(job_from_row(row))
        return ReapReport(reaped, killed)

    async def _expired(self, tasks: bool, limit: int) -> list[uuid.UUID]:
        return [r["id"] for r in await self._fetch("workflow_expired", tasks, limit)]
