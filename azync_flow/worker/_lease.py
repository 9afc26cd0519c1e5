"""Lease handles: the fencing token of one leased job, and its heartbeat.

A :class:`LeaseHandle` is what a :data:`JobRunner` gets next to the job. The
owning :class:`~azync_flow.worker.LeaseLoop` renews the lease in the
background (``extend_lease`` at about a third of the lease) for as long as the
runner works; when a renewal is rejected (the token no longer owns the row —
the job was reaped and possibly re-leased elsewhere) the handle is marked
:attr:`~LeaseHandle.lost` and the runner's task is cancelled, so a stale
attempt stops instead of running on beside its successor (scenario C13).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..store.errors import AzyncError, is_not_found
from ..store.types import Job

if TYPE_CHECKING:
    from ._store import WorkerStore

__all__ = ["LeaseHandle", "LeaseLost"]


class LeaseLost(AzyncError):
    """The job's lease token no longer owns the row: another attempt may run it now.

    Raised by :meth:`LeaseHandle.extend` (and ``JobContext.heartbeat``). A
    runner that sees it must stop and must not settle the job.
    """

    code = "lease_lost"


class LeaseHandle:
    """The live lease on one job, as held by a runner.

    Attributes:
        job: the leased job (``job.lease_token`` is the fencing token).
        lease: the lease duration used for leasing and renewals.
        lost: True once a renewal was rejected or the runner was cancelled
            because the lease was lost.
    """

    __slots__ = ("_store", "_task", "job", "lease", "lost", "next_beat", "shutdown_cancelled")

    def __init__(self, store: WorkerStore, job: Job, lease: timedelta, now: float) -> None:
        self._store = store
        self.job = job
        self.lease = lease
        self.lost = False
        self.shutdown_cancelled = False
        self.next_beat = now + lease.total_seconds() / 3
        self._task: asyncio.Task[Any] | None = None

    @property
    def id(self) -> uuid.UUID:
        return self.job.id

    @property
    def token(self) -> uuid.UUID:
        """The fencing token every settle of this job must carry."""
        assert self.job.lease_token is not None
        return self.job.lease_token

    async def extend(self, lease: timedelta | None = None) -> None:
        """Renew the lease now to backend ``now() + lease`` (default: the loop's lease).

        The background heartbeat calls this; runners may call it too (a
        manual heartbeat after a long step).

        Raises:
            LeaseLost: the token no longer owns an active row; the runner's
                task is cancelled as well.
            StoreError: the database could not be reached (the lease is
                still held until it expires; the heartbeat retries).
        """
        lease = lease or self.lease
        try:
            await self._store.extend_lease(self.job.id, self.token, lease)
        except Exception as exc:
            if is_not_found(exc):
                self.mark_lost()
                raise LeaseLost(f"lease of job {self.job.id} was lost: {exc}") from exc
            raise
        loop = asyncio.get_running_loop()
        self.next_beat = loop.time() + lease.total_seconds() / 3

    def mark_lost(self) -> None:
        """Record that the lease is gone and cancel the runner's task."""
        if self.lost:
            return
        self.lost = True
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
