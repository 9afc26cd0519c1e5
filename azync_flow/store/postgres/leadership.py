"""Leadership and the worker registry of the PostgreSQL driver (contract
:mod:`azync_flow.store.leadership`).

Leader election is a lease on the backend clock.

Each leadership is one ``azync_leaders`` row of the store's schema: its holder,
its *term* and an expiry on the backend clock (``coalesce($1, now())``). The
holder renews it (:meth:`PgLeadershipLease.valid`, once per maintenance tick);
once it has lapsed any instance takes it over with ``term + 1``. A holder
that was frozen (SIGSTOP, a long GC or swap stall) therefore loses the
leadership after its TTL however long its session lives, and the term is the
fencing token of its maintenance writes: inside :meth:`PgLeadershipLease.fenced`
every statement of the store checks, in its own transaction, that the term
still leads (see ``_fence``), so a holder that wakes up after losing the
lease cannot write.

The worker registry (migration 0018) is what each running worker registers:
one row per worker process, written only by that worker — at start, by a
periodic refresh off the hot path, and at stop — so the registry never makes
two transactions wait on one row. A worker killed without stopping leaves a
row that stops counting once its expiry passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

import asyncpg

from ...errors import StoreError, StoreUnavailableError
from ..leadership import DEFAULT_LEADER_TTL
from ._base import PgBase
from ._fence import CURRENT_FENCE, LeaderFence
from ._queries import QUERIES

__all__ = [
    "LeaderMixin",
    "PgLeadershipLease",
    "WorkerRegistryMixin",
    "default_holder",
]

log = logging.getLogger("azync_flow.store")

#: The pool raises StoreUnavailableError for an unreachable database; the rest
#: are driver errors of the statement itself.
_ERRORS = (
    StoreUnavailableError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    TimeoutError,
)


def default_holder() -> str:
    """``"<host>:<pid>"``: who holds a leadership, for operators and logs."""
    return f"{socket.gethostname()}:{os.getpid()}"


class PgLeadershipLease:
    """A held leadership term.

    Attributes:
        name: leadership name.
        term: the term this holder was elected with (grows with every takeover).
        ttl: how long the lease holds without renewal (backend clock).
        expires_at: expiry as of the last successful renewal (backend clock).
    """

    def __init__(
        self, store: PgBase, name: str, term: int, ttl: timedelta, expires_at: datetime
    ) -> None:
        self._store = store
        self.name = name
        self.term = term
        self.ttl = ttl
        self.expires_at = expires_at
        self.fence = LeaderFence(name, term, max(int(ttl.total_seconds() * 1000) // 3, 50))
        self._lost = False
        self._renewed_at = asyncio.get_running_loop().time()

    async def valid(self) -> bool:
        """Renew the lease; True while this term still holds it.

        One statement, meant for once per maintenance tick. False is sticky
        once the backend says the term is over (expired or taken over). When
        the database cannot be reached the answer is whether the TTL can have
        run out since the last renewal (conservative, by the local monotonic
        clock); the fence still guards every write.
        """
        if self._lost:
            return False
        loop = asyncio.get_running_loop()
        sent = loop.time()
        try:
            until = await self._store.pool.fetchval(
                QUERIES["leader_renew"], self._store.now(), self.name, self.term, self.ttl
            )
        except _ERRORS:
            return loop.time() < self._renewed_at + self.ttl.total_seconds()
        if until is None:
            self._lost = True
            return False
        self.expires_at = until
        self._renewed_at = sent
        return True

    async def renew_if_due(self) -> bool:
        """Implements ``LeadershipLease.renew_if_due`` (documented there)."""
        if self._lost:
            return False
        if asyncio.get_running_loop().time() - self._renewed_at < self.ttl.total_seconds() / 3:
            return True
        return await self.valid()

    @contextmanager
    def fenced(self) -> Iterator[None]:
        """Implements ``LeadershipLease.fenced`` (documented there)."""
        token = CURRENT_FENCE.set(self.fence)
        try:
            yield
        finally:
            CURRENT_FENCE.reset(token)

    async def release(self) -> None:
        """Implements ``LeadershipLease.release`` (documented there)."""
        if self._lost:
            return
        self._lost = True
        with contextlib.suppress(*_ERRORS):  # else it lapses after its TTL anyway
            await self._store.pool.execute(
                QUERIES["leader_release"], self._store.now(), self.name, self.term
            )


class LeaderMixin(PgBase):
    async def acquire_leadership_lease(
        self, name: str, ttl: timedelta = DEFAULT_LEADER_TTL, *, holder: str = ""
    ) -> PgLeadershipLease | None:
        """Contract ``LeaseElector.AcquireLeadershipLease``.

        Takes the leadership when nobody holds it or its lease has lapsed on
        the backend clock (a takeover increments the term). Never waits on a
        live holder; it waits at most about ``ttl / 3`` for a lapsed holder's
        fenced transaction to end, then ends that holder's session (its
        uncommitted write is lost), whatever state a frozen holder left it in.
        Ending it needs the right to signal that backend: the same database
        role, or ``pg_signal_backend``.

        Args:
            name: leadership name (scoped to the store's schema).
            ttl: how long the lease holds without renewal; renew with
                :meth:`PgLeadershipLease.valid` well within it.
            holder: who leads, for operators (default ``"<host>:<pid>"``).

        Returns:
            The lease when acquired, None when another instance leads.

        Raises:
            ValueError: ``ttl`` is not positive.
            StoreUnavailableError: the database cannot be reached right now.
            StoreError: the database refused the statement.
        """
        if ttl <= timedelta(0):
            raise ValueError("leadership ttl must be positive")
        try:
            row = await self._take_or_insert(name, holder or default_holder(), ttl)
        except StoreUnavailableError:
            raise
        except _ERRORS as exc:
            raise StoreError(f"cannot acquire leadership {name!r} ({exc})") from exc
        if row is None:
            return None
        return PgLeadershipLease(self, name, int(row["term"]), ttl, row["expires_at"])

    async def _take_or_insert(
        self, name: str, holder: str, ttl: timedelta
    ) -> asyncpg.Record | None:
        # A lapsed holder frozen inside a fenced statement (SIGSTOP between two
        # protocol messages) keeps its session "active": no server timeout ends
        # it. After a third of the TTL the contender ends the sessions it waits on.
        grace = max(ttl.total_seconds() / 3, 0.05)
        async with self.pool.acquire() as conn:
            attempt = asyncio.ensure_future(
                conn.fetchrow(QUERIES["leader_acquire"], self.now(), name, holder, ttl)
            )
            try:
                return await asyncio.wait_for(asyncio.shield(attempt), grace)
            except TimeoutError:
                pass
            try:
                ended = await self.pool.fetch(
                    QUERIES["leader_cut_off"], self.now(), conn.get_server_pid()
                )
            except BaseException:
                attempt.cancel()
                raise
            for r in ended:
                log.warning(
                    "leadership %r: ended session %s of a lapsed term, which held "
                    "the takeover for %.1fs",
                    name,
                    r["pid"],
                    grace,
                )
            return await attempt


class WorkerRegistryMixin(PgBase):
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
        """Insert or refresh this worker's row: it runs ``workflows`` and
        ``activities`` on ``task_queues`` and counts as live for ``ttl`` from
        now (backend clock). Call it again before the ``ttl`` passes to stay live."""
        await self._fetch(
            "worker_register",
            worker_id,
            host,
            pid,
            sorted(set(workflows)),
            ttl,
            sorted(set(task_queues)),
            sorted(set(activities)),
        )

    async def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove this worker's row (it is stopping). No error when absent."""
        await self._fetch("worker_unregister", worker_id)

    async def live_workers_for_workflow(self, name: str, task_queue: str = "default") -> int:
        """How many live workers (expiry not passed) register workflow ``name`` and
        serve ``task_queue``."""
        return int(await self._fetchval("worker_live_for_workflow", name, task_queue))
