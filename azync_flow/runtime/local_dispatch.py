"""Local dispatch: the activities a pass schedules, leased to this worker in the
pass's own commit and run at once (no NOTIFY, no dequeue).

Per pass::

    claim = dispatch.claim(write)     # reserve free slots of the activity loops,
                                      # name the operations to insert leased
    result = await store.commit_...(write)
    claim.launch(result.leased)       # run them like dequeued attempts
    # or claim.cancel() when the commit failed (nothing was leased)

An activity this worker does not register, routed to a task queue it does not
serve, or whose loop has no free slot, is inserted pending as on the plain
path and a worker serving it dequeues it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta

from azync_flow.store.queue import Job
from azync_flow.store.workflows import OperationLease, PassWrite
from azync_flow.worker import LeaseLoop

__all__ = ["Claim", "LocalDispatch"]


class Claim:
    """Slots reserved for one commit's operations; settle it exactly once."""

    __slots__ = ("_loops", "_reserved")

    def __init__(self, loops: Mapping[str, LeaseLoop], reserved: dict[str, int]) -> None:
        self._loops = loops
        self._reserved = reserved

    def launch(self, leased: list[Job]) -> None:
        """Run the operations the commit inserted leased; free the unused slots."""
        for job in leased:
            loop = self._loops[job.kind]
            if self._reserved.get(job.kind, 0) > 0:
                self._reserved[job.kind] -= 1
                loop.run_leased(job)
            else:  # cannot happen: the store leases only the keys claimed
                loop.run_leased(job, reserved=False)
        self.cancel()

    def cancel(self) -> None:
        """Give back every slot still reserved (the commit failed or leased fewer)."""
        for kind, n in self._reserved.items():
            if n:
                self._loops[kind].unreserve(n)
        self._reserved = {}


class LocalDispatch:
    """Decides which operations of a pass this worker takes itself.

    Args:
        loops: the worker's activity lease loops by job kind (``$op:name@version``).
        enabled: False makes every claim empty (all operations pending).
        task_queues: the task queues the worker serves (operations routed
            elsewhere are never claimed).
    """

    def __init__(
        self,
        loops: Mapping[str, LeaseLoop],
        *,
        enabled: bool = True,
        task_queues: Collection[str] = ("default",),
    ) -> None:
        self.loops = loops
        self.enabled = enabled
        self.task_queues = frozenset(task_queues)

    def claim(self, write: PassWrite) -> Claim | None:
        """Reserve slots for the operations of ``write`` this worker can run now and
        set ``write.local`` to lease them in the commit.

        Returns:
            The claim to settle after the commit, or None when nothing was claimed.
        """
        if not self.enabled or not write.operations:
            return None
        reserved: dict[str, int] = {}
        keys: list[str] = []
        lease: timedelta | None = None
        attempts = 25
        for op in write.operations:
            loop = self.loops.get(op.kind)
            if loop is None or op.run_at is not None or op.task_queue not in self.task_queues:
                continue
            if lease is not None and loop.lease != lease:
                continue  # one lease per commit; the others stay pending
            if loop.reserve(1) == 0:
                loop.mark_backlog()  # inserted pending: it waits for one of its slots
                continue
            lease = loop.lease
            attempts = loop.default_max_attempts
            reserved[op.kind] = reserved.get(op.kind, 0) + 1
            keys.append(op.execution_key)
        if lease is None:
            return None
        write.local = OperationLease(keys=keys, lease=lease, default_max_attempts=attempts)
        return Claim(self.loops, reserved)
