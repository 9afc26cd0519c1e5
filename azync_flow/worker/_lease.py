"""Lease handles: the fencing token of one leased job, and its heartbeat.

A :class:`LeaseHandle` is what a :data:`JobRunner` gets next to the job. The
owning :class:`~azync_flow.worker.LeaseLoop` renews the lease in the
background (``extend_lease`` at about a third of the lease) for as long as the
runner works; when a renewal is rejected (the token no longer owns the row —
the job was reaped and possibly re-leased elsewhere) the handle is marked
:attr:`~LeaseHandle.lost` and the runner's task is cancelled, so a stale
attempt stops instead of running on beside its successor.

A runner may instead declare that silence means loss
(:meth:`LeaseHandle.renew_only_by_heartbeats`): the background renewal then
skips the job, its lease is renewed only by the runner's own
:meth:`~LeaseHandle.extend` calls, and once it lapses the loop marks the
handle lost and cancels the runner, freeing its slot.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..errors import LeaseLost, is_not_found
from ..store.queue import Job

if TYPE_CHECKING:
    from ._store import WorkerStore

__all__ = ["LeaseHandle", "LeaseLost", "lease_gone"]


class LeaseHandle:
    """The live lease on one job, as held by a runner.

    Attributes:
        job: the leased job (``job.lease_token`` is the fencing token).
        lease: the lease duration used for leasing and renewals.
        lost: True once a renewal was rejected or the runner was cancelled
            because the lease was lost.
        heartbeat_only: True when only the runner's own heartbeats renew the
            lease (see :meth:`renew_only_by_heartbeats`).
        expires_at: event-loop time (``loop.time()``, seconds) by which the
            lease lapses unless renewed; measured from when the last renewal
            returned, so it is never earlier than the backend's expiry.
    """

    __slots__ = (
        "_rearm",
        "_store",
        "_task",
        "expires_at",
        "heartbeat_only",
        "job",
        "lease",
        "lost",
        "next_beat",
        "shutdown_cancelled",
    )

    def __init__(
        self,
        store: WorkerStore,
        job: Job,
        lease: timedelta,
        now: float,
        rearm: asyncio.Event | None = None,
    ) -> None:
        self._store = store
        self._rearm = rearm  # wakes the owning loop's heartbeat task
        self.job = job
        self.lease = lease
        self.lost = False
        self.shutdown_cancelled = False
        self.heartbeat_only = False
        self.next_beat = now + lease.total_seconds() / 3
        self.expires_at = now + lease.total_seconds()
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
            LeaseLost: the token no longer owns an active row, or the lease
                already lapsed (:attr:`lost`; a lapsed lease is never revived,
                whether or not the reaper took the job yet); the runner's task
                is cancelled as well.
            StoreError: the database could not be reached (the lease is
                still held until it expires; the heartbeat retries).
        """
        if self.lost:
            raise LeaseLost(f"lease of job {self.job.id} was lost; it is not renewed")
        lease = lease or self.lease
        try:
            await self._store.extend_lease(self.job.id, self.token, lease)
        except Exception as exc:
            if is_not_found(exc):
                self.mark_lost()
                raise LeaseLost(f"lease of job {self.job.id} was lost: {exc}") from exc
            raise
        now = asyncio.get_running_loop().time()
        self.next_beat = now + lease.total_seconds() / 3
        self.expires_at = now + lease.total_seconds()

    async def renew_only_by_heartbeats(self, silence: timedelta) -> None:
        """From now on, renew this lease only when the runner calls :meth:`extend`.

        The lease is set to backend ``now() + silence`` at once (shorter or
        longer than the loop's), ``silence`` becomes the default renewal
        length, and the loop's background renewal stops covering the job. A
        runner silent for longer than ``silence`` loses the job: the reaper
        takes it once the lease expired, and the loop marks this handle
        :attr:`lost` and cancels the runner's task.

        Args:
            silence: the longest gap between renewals (> 0) the runner is allowed.

        Raises:
            ValueError: ``silence`` is not positive.
            LeaseLost: the lease was lost already.
        """
        if silence <= timedelta(0):
            raise ValueError("silence must be positive")
        self.heartbeat_only = True
        self.lease = silence
        await self.extend(silence)
        if self._rearm is not None:
            self._rearm.set()  # its lapse may come before the loop's next tick

    def lapsed(self, now: float) -> bool:
        """True when a heartbeat-only lease was not renewed in time (loop time ``now``)."""
        return self.heartbeat_only and not self.lost and now >= self.expires_at

    def gone(self) -> bool:
        """True when this runner may no longer own the job: the lease was lost, or
        it lapsed by the loop clock (a frozen or stalled process; the backend's
        expiry is never later), so the reaper may have taken the job over."""
        return self.lost or asyncio.get_running_loop().time() >= self.expires_at

    def settled(self) -> bool:
        """True once the runner returned: its outcome was handed to the acker,
        so a renewal refused from then on means the job was settled, not lost."""
        return self._task is not None and self._task.done()

    def mark_lost(self) -> None:
        """Record that the lease is gone and cancel the runner's task."""
        if self.lost:
            return
        self.lost = True
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()


def lease_gone(lease: object) -> bool:
    """:meth:`LeaseHandle.gone` of a runner's ``lease`` argument; False for None
    (a caller without a worker lease handle, e.g. ``run_until_idle`` helpers)."""
    return isinstance(lease, LeaseHandle) and lease.gone()
