"""Leadership as a lease on the backend clock, and the registry of running
workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_LEADER_TTL",
    "IdentityClaimer",
    "LeadershipLease",
    "LeaseElector",
    "WorkerIdentity",
    "WorkerRegistryStore",
]


#: Default time a leadership stays held without renewal (backend clock).
DEFAULT_LEADER_TTL = timedelta(seconds=10)


@runtime_checkable
class LeadershipLease(Protocol):
    """A held leadership (contract ``LeadershipLease``)."""

    async def valid(self) -> bool:
        """Renew the lease; True while this term still holds the leadership on
        the backend clock (one statement, once per tick)."""
        ...

    async def renew_if_due(self) -> bool:
        """:meth:`valid` when a third of the TTL passed since the last renewal,
        else True (so long maintenance ticks keep the lease)."""
        ...

    def fenced(self) -> AbstractContextManager[None]:
        """Fence the store statements of the current task by this term.

        Inside the block every statement runs in a transaction that first
        checks the term still leads (raising
        :class:`~azync_flow.store.LeadershipLostError` otherwise, nothing
        written) and blocks a takeover until it ends.
        """
        ...

    async def release(self) -> None:
        """Expire the lease now so another instance takes over at once.
        Idempotent; never raises."""
        ...


@runtime_checkable
class LeaseElector(Protocol):
    """Contract ``LeaseElector``."""

    async def acquire_leadership_lease(
        self, name: str, ttl: timedelta = ..., *, holder: str = ...
    ) -> LeadershipLease | None:
        """Try to take the named leadership; None when another instance leads.

        ``holder`` names the process for operators (default ``"<host>:<pid>"``).

        A leadership is a lease on the backend clock: free or lapsed for
        ``ttl`` since its last renewal, it is taken with a higher term. Renew
        it with :meth:`LeadershipLease.valid` (once per tick, well within
        ``ttl``), run leader-only writes inside :meth:`LeadershipLease.fenced`
        and release it when done.

        It also serves the contract's ``LeaderElector.AcquireLeadership``
        (``acquired`` is a lease, ``release`` is :meth:`LeadershipLease.release`,
        ``err`` is raised; docs/operations.md maps it clause by clause).
        """
        ...


@runtime_checkable
class WorkerIdentity(Protocol):
    """A claimed worker identity (contract ``IdentityClaimer``).

    Attributes:
        name: the identity, e.g. ``"web-1/0"``.
        holder: what this process writes as the holder of its leaderships,
            ``"<name>:<pid>"``.
        taken_back: at claim time, ``(leases, leaderships)`` the previous
            incarnation under this name still held and that were expired.
    """

    name: str
    holder: str
    taken_back: tuple[int, int]

    async def check(self) -> bool:
        """True while the identity is held; when its session was lost (the
        database restarted) claim it again, without taking anything back.
        False when another live process took it meanwhile. Never raises."""
        ...

    async def release(self) -> None:
        """Give the identity up (after the worker's last settle). Idempotent."""
        ...


@runtime_checkable
class IdentityClaimer(Protocol):
    """Contract ``IdentityClaimer``: a worker identity that survives a restart.

    Clauses:
        * Two live processes never hold one identity: it is fenced by a
          session of its own, which ends with the process.
        * Every lease the store takes while the identity is held is marked
          with it (jobs, workflow tasks, activity attempts, DAG tasks, event
          deliveries).
        * Claiming an identity expires at once the leases and leaderships an
          earlier holder of the same name still held (its process died), so
          the reaper hands them back at its next tick; fencing on every
          settle is unchanged.
        * One store holds one identity; further claims share it.
    """

    async def claim_worker_identity(self, name: str | None = None) -> WorkerIdentity:
        """Claim ``name``, or by default the first free ``"<host>/<n>"``
        (``n`` from 0), and take back what its previous holder left.

        Raises:
            ValueError: ``name`` is empty, longer than 200 characters or has
                characters other than letters, digits and ``._/@-``; or the
                store already holds a different identity.
            IdentityInUseError: another live process holds ``name``.
            StoreUnavailableError: the database cannot be reached.
        """
        ...


@runtime_checkable
class WorkerRegistryStore(Protocol):
    """What each running worker registers (one row per worker, written only by
    it): the workflow names it runs, live until its expiry."""

    async def register_worker(
        self,
        worker_id: uuid.UUID,
        workflows: Sequence[str],
        ttl: timedelta,
        *,
        host: str = "",
        pid: int = 0,
        task_queues: Sequence[str] = ("default",),
        activities: Sequence[str] = (),
    ) -> None:
        """Insert or refresh this worker's row, live for ``ttl`` from now: the
        workflow names, activity kinds (``$op:<name>@<version>``) and task
        queues it serves."""
        ...

    async def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove this worker's row (it is stopping)."""
        ...

    async def live_workers_for_workflow(self, name: str, task_queue: str = "default") -> int:
        """How many live workers register workflow ``name`` and serve ``task_queue``."""
        ...
