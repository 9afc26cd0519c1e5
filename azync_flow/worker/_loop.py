"""LeaseLoop: lease jobs of one (source, kind), run them, keep their leases alive.

This is the extension point the other runtimes (workflow tasks, activities,
DAG tasks, event deliveries) build on: they hand the :class:`Worker` a
:data:`JobRunner` through :meth:`Worker.add_loop` and get batching, the
concurrency limit, wake-ups, heartbeats and graceful shutdown for free.

Loop cycle::

    free = concurrency - in_flight           # never lease more than free slots
    jobs = dequeue_batch(limit=min(free, batch_size))
    for job in jobs: spawn runner(job, LeaseHandle)
    if nothing leased: wait for a wake-up (NOTIFY) or poll_interval
    if the dequeue failed: back off (doubling up to 5 s); wake-ups do not cut it short

An idle loop makes one ``dequeue_batch`` per ``poll_interval`` and otherwise
sleeps on its wake event; it never spins.

A job that becomes due at a known time (a durable timer this process just
armed, or the earliest scheduled job a poll saw) is announced by no NOTIFY:
:meth:`LeaseLoop.wake_in` records its due time and one local timer handle
(``loop.call_at``, for the earliest recorded due time) pokes the loop then,
so it leases the job at its due time instead of at the next poll.

A job leased by another component (a transaction that inserts it already
leased to this worker) is handed over with :meth:`LeaseLoop.reserve` (before
that transaction, so the slot is held) and :meth:`LeaseLoop.run_leased`
(after it): it then runs exactly like a dequeued job.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, NamedTuple

from .. import _metrics
from .._logging import log_failure
from ..errors import SchemaNotMigratedError, is_not_found
from ..store.queue import DEFAULT_TASK_QUEUE, DequeueParams, Job, Source
from ._lease import LeaseHandle

if TYPE_CHECKING:
    from ._store import WorkerStore

__all__ = ["JobRunner", "LeaseLoop", "LoopStats"]

log = logging.getLogger("azync_flow.worker")

#: Seconds a cancelled job may take to unwind at shutdown before it is released anyway.
CANCEL_WAIT = 5.0

#: ``async def run(job, lease) -> None``: run one leased job and settle it
#: (ack / reschedule / dead / snooze / release ...) with ``lease.token``.
#: An exception escaping the runner is logged and the job is left to its lease
#: expiry (the reaper re-runs it). Cancellation means shutdown or a lost lease:
#: the runner must not settle then.
JobRunner = Callable[[Job, LeaseHandle], Awaitable[None]]

#: Seconds a local due-time wake fires after the due time: the lease compares
#: due times with the database clock, so waking exactly on time could find the
#: job not yet due.
DUE_WAKE_MARGIN = 0.002

#: Most due times a loop remembers; past that the rest are found by polling.
MAX_DUE_WAKES = 4096

#: ``async def next_due() -> float | None``: seconds until the earliest job of
#: a loop that is scheduled for later becomes due (None: none is scheduled).
NextDue = Callable[[], Awaitable[float | None]]


class Batch(NamedTuple):
    """A lease that knows whether it took everything due for its caller."""

    jobs: list[Job]
    #: no job the loop could lease was left due: the loop sleeps until woken
    #: instead of leasing again at once to learn that it is caught up
    drained: bool


#: ``async def dequeue(limit, lease) -> list[Job] | Batch``: a loop's own lease
#: query (a plain list: a short one means caught up, a full one lease again).
Dequeue = Callable[[int, timedelta], Awaitable[list[Job] | Batch]]


class LoopStats:
    """Counters of one loop, for tests and metrics."""

    __slots__ = (
        "dequeues",
        "due_wakes",
        "empty_dequeues",
        "errors",
        "heartbeats",
        "leased",
        "local",
        "lost",
        "released",
    )

    def __init__(self) -> None:
        self.dequeues = 0
        #: times the local due-time timer woke the loop (see :meth:`LeaseLoop.wake_in`)
        self.due_wakes = 0
        self.empty_dequeues = 0
        self.leased = 0
        #: jobs handed over already leased (:meth:`LeaseLoop.run_leased`), in ``leased`` too
        self.local = 0
        self.heartbeats = 0
        self.lost = 0
        self.released = 0
        self.errors = 0


class LeaseLoop:
    """Leases and runs the jobs of one ``(source, kind)`` under a concurrency limit.

    Create loops with :meth:`Worker.add_loop` (or :meth:`Worker.register` for
    queue handlers); the worker starts, stops and drains them.

    Args:
        store: the store to lease from.
        source: job partition (queue, event, dag, workflow).
        kind: job kind within the source.
        runner: coroutine function running and settling one job.
        concurrency: maximum jobs of this loop running at once (per worker).
        batch_size: maximum jobs leased per ``dequeue_batch`` (<= concurrency).
        lease: lease duration; renewed at about ``lease / 3`` while running.
        poll_interval: fallback polling period when no wake-up arrives.
        default_max_attempts: retry budget applied durably on the first lease.
        override_default: see ``DequeueParams.override_default``.
        dequeue: ``async def (limit, lease) -> list[Job] | Batch`` replacing
            the generic ``dequeue_batch`` (e.g. ``lease_workflow_tasks``, which
            never leases two workflow tasks of one execution at once); a
            ``Batch`` that is ``drained`` ends the round without a second lease.
        task_queues: the task queues the generic ``dequeue_batch`` leases from.
        next_due: ``async def () -> float | None``, seconds until the loop's
            earliest job scheduled for later is due; asked when the loop goes
            to sleep (at most about once per ``poll_interval``), so it wakes at
            that due time (None: the loop learns due jobs by polling only).
    """

    def __init__(
        self,
        store: WorkerStore,
        source: Source,
        kind: str,
        runner: JobRunner,
        *,
        concurrency: int,
        batch_size: int,
        lease: timedelta,
        poll_interval: timedelta,
        default_max_attempts: int = 25,
        override_default: bool = True,
        dequeue: Dequeue | None = None,
        task_queues: tuple[str, ...] = (DEFAULT_TASK_QUEUE,),
        next_due: NextDue | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if lease <= timedelta(0):
            raise ValueError("lease must be positive")
        self.store = store
        self.source = source
        self.kind = kind
        self.runner = runner
        self.concurrency = concurrency
        self.batch_size = max(1, min(batch_size, concurrency))
        self.lease = lease
        self.poll_interval = poll_interval.total_seconds()
        self.default_max_attempts = default_max_attempts
        self.override_default = override_default
        self.custom_dequeue = dequeue
        self.task_queues = task_queues
        self.stats = LoopStats()
        self.in_flight: dict[asyncio.Task[None], LeaseHandle] = {}
        #: Slots promised to jobs another component is leasing for this loop
        #: (see :meth:`reserve`); the lease loop never fills them.
        self.reserved = 0
        self.wake = asyncio.Event()
        self.idle = False
        #: True while :meth:`run` leases (jobs handed over then get heartbeats).
        self.running = False
        self._stopping = False
        self._stop_requested = asyncio.Event()
        self._slot_freed = asyncio.Event()
        #: True from :meth:`mark_backlog` (a job of this kind was left in the
        #: queue for want of a slot) until a dequeue comes back short.
        self.backlog = False
        #: Called (synchronously) when the loop may have slots to spare: after a
        #: dequeue that came back short, and when a slot frees without a backlog.
        self.spare_listeners: list[Callable[[], None]] = []
        self._changed: asyncio.Event | None = None
        self._beats: asyncio.Task[None] | None = None
        self._rearm = asyncio.Event()
        self.next_due = next_due
        #: Loop-clock times at which to poke the loop (a heap) and the one timer
        #: handle, armed for the earliest of them.
        self._dues: list[float] = []
        self._due_timer: asyncio.TimerHandle | None = None
        self._next_due_asked = float("-inf")

    def __repr__(self) -> str:
        return f"<LeaseLoop {self.source}:{self.kind} concurrency={self.concurrency}>"

    def free_slots(self) -> int:
        """Slots neither running a job nor reserved (0 unless the loop is running)."""
        if self._stopping or not self.running:
            return 0
        return max(0, self.concurrency - len(self.in_flight) - self.reserved)

    def open_slots(self) -> int:
        """Slots neither running a job nor reserved, whether or not the loop runs."""
        return max(0, self.concurrency - len(self.in_flight) - self.reserved)

    def mark_backlog(self) -> None:
        """Note that a job of this kind waits in the queue for a slot of this loop
        (cleared when a dequeue finds nothing more)."""
        self.backlog = True

    def reserve(self, n: int) -> int:
        """Reserve up to ``n`` free slots for jobs leased elsewhere (a transaction
        that inserts them already leased); hand each to :meth:`run_leased` or give
        it back with :meth:`unreserve`.

        Returns:
            How many slots were reserved (0..n).
        """
        granted = min(max(n, 0), self.free_slots())
        self.reserved += granted
        return granted

    def unreserve(self, n: int) -> None:
        """Give back ``n`` reserved slots that will not be used."""
        self.reserved = max(0, self.reserved - n)
        if n:
            self._free_slot()

    def run_leased(self, job: Job, *, reserved: bool = True) -> None:
        """Run a job that is already leased to this worker (``job.lease_token`` set,
        state active), exactly like a dequeued one: it takes a slot, its lease is
        renewed in the background and it is released at shutdown.

        Args:
            job: the leased job.
            reserved: the slot was taken with :meth:`reserve` (it is consumed).

        Raises:
            ValueError: ``job`` carries no lease token.
        """
        if job.lease_token is None:
            raise ValueError(f"job {job.id} is not leased (no lease token)")
        if reserved:
            self.reserved = max(0, self.reserved - 1)
        self.stats.leased += 1
        self.stats.local += 1
        self._set_idle(False)
        self._spawn(job)

    def poke(self) -> None:
        """Make an idle loop try to lease now (used by wake-ups and maintenance)."""
        self.wake.set()

    def wake_in(self, seconds: float) -> None:
        """Poke the loop ``seconds`` from now (plus :data:`DUE_WAKE_MARGIN`):
        a job becomes due then that no NOTIFY will announce (e.g. a durable
        timer). One timer handle serves every recorded due time: it is armed
        for the earliest and, when it fires, re-armed for the next. Ignored
        once the loop is stopping.

        Args:
            seconds: delay from now, on the monotonic clock (negative: now).
        """
        if self._stopping:
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + max(seconds, 0.0) + DUE_WAKE_MARGIN
        if len(self._dues) >= MAX_DUE_WAKES and at >= self._dues[0]:
            return  # bounded memory; a poll finds it
        heapq.heappush(self._dues, at)
        self._arm_due(loop)

    @property
    def due_wakes_pending(self) -> int:
        """Due times recorded and not yet reached (for tests and metrics)."""
        return len(self._dues)

    def _arm_due(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._dues:
            return
        first = self._dues[0]
        timer = self._due_timer
        if timer is not None:
            if timer.when() <= first:
                return
            timer.cancel()
        self._due_timer = loop.call_at(first, self._due_reached)

    def _due_reached(self) -> None:
        self._due_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        # due times within a millisecond share this wake (one lease round)
        while self._dues and self._dues[0] <= now + 0.001:
            heapq.heappop(self._dues)
        self.stats.due_wakes += 1
        self.poke()
        self._arm_due(loop)

    def _cancel_due(self) -> None:
        timer, self._due_timer = self._due_timer, None
        if timer is not None:
            timer.cancel()
        self._dues.clear()

    def reset(self) -> None:
        """Make a stopped loop ready to :meth:`run` again."""
        self._stopping = False
        self._stop_requested.clear()
        self.idle = False

    def stop(self) -> None:
        """Stop leasing; jobs already leased keep running (see :meth:`drain`)."""
        self._stopping = True
        self._cancel_due()
        self._stop_requested.set()
        self.wake.set()
        self._slot_freed.set()

    async def run(self, changed: asyncio.Event | None = None) -> None:
        """Lease and dispatch until :meth:`stop`.

        Heartbeats start with the loop and keep running after it returns,
        while leased jobs finish; :meth:`drain` ends them.

        Args:
            changed: set whenever the loop's idle state may have changed
                (the worker's idle detector waits on it).
        """
        self._changed = changed
        if self._beats is None or self._beats.done():
            self._beats = asyncio.create_task(self._heartbeat_loop(), name=f"heartbeat {self}")
        self.running = True
        try:
            await self._lease_loop()
        except BaseException:
            await self._stop_heartbeats()
            raise
        finally:
            self.running = False

    async def _stop_heartbeats(self) -> None:
        beats, self._beats = self._beats, None
        if beats is not None:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats

    async def _lease_loop(self) -> None:
        error_backoff = 0.05
        while not self._stopping:
            free = self.concurrency - len(self.in_flight) - self.reserved
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                await asyncio.sleep(0)  # let sibling jobs finishing now free their slots too
                continue
            self.wake.clear()
            asked = min(free, self.batch_size)
            try:
                jobs, drained = await self._dequeue(asked)
            except SchemaNotMigratedError:
                raise  # not retryable: the worker stops with the migrate hint
            except Exception as exc:
                self.stats.errors += 1
                log_failure(log, exc, "%r: dequeue failed; retrying in %.2fs", self, error_backoff)
                await self._back_off(error_backoff)
                error_backoff = min(error_backoff * 2, 5.0)
                continue
            error_backoff = 0.05
            if len(jobs) < asked:  # caught up with everything due of its kind
                self.backlog = False
                self._spare()
            if jobs:
                self._set_idle(False)
                for job in jobs:
                    self._spawn(job)
                if not drained:
                    continue
                # Nothing else due: a wake-up sent since this lease began is
                # kept (``wake`` was cleared before it) and ends the sleep.
            elif not self.in_flight:
                self._set_idle(True)
                if self._changed is not None:
                    self._changed.set()
            await self._learn_next_due()
            await self._sleep_or_wake(self.poll_interval)

    async def _learn_next_due(self) -> None:
        """Before sleeping, ask when the next scheduled job is due (at most about
        once per ``poll_interval``) and wake then, if that is before the poll."""
        if self.next_due is None or self._stopping:
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._next_due_asked < self.poll_interval / 2:
            return
        self._next_due_asked = loop.time()
        try:
            wait = await self.next_due()
        except Exception as exc:  # polling still finds it
            log.debug("%r: next due time unknown (%s)", self, exc)
            return
        if wait is not None and wait < self.poll_interval:
            self.wake_in(wait)

    async def _dequeue(self, limit: int) -> tuple[list[Job], bool]:
        got = await (
            self._dequeue_batch(limit)
            if self.custom_dequeue is None
            else self.custom_dequeue(limit, self.lease)
        )
        jobs, drained = got if isinstance(got, Batch) else (got, False)
        # counted once the answer is in: run_until_idle waits for a lease round
        # to FINISH (a count taken before the await let it see a stale idle flag)
        self.stats.dequeues += 1
        if not jobs:
            self.stats.empty_dequeues += 1
        self.stats.leased += len(jobs)
        return jobs, drained

    async def _dequeue_batch(self, limit: int) -> list[Job]:
        return await self.store.dequeue_batch(
            self.source,
            DequeueParams(
                kind=self.kind,
                limit=limit,
                lease=self.lease,
                default_max_attempts=self.default_max_attempts,
                override_default=self.override_default,
                task_queues=self.task_queues,
            ),
        )

    async def _sleep_or_wake(self, seconds: float) -> None:
        if self._stopping or self.wake.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.wake.wait()

    async def _back_off(self, seconds: float) -> None:
        """Sleep after a failed dequeue; only :meth:`stop` cuts it short.

        Wake-ups do not: they keep arriving while the store fails (other
        producers, other runtimes), and retrying on each would turn the
        backoff into a busy loop.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop_requested.wait()

    def _set_idle(self, idle: bool) -> None:
        if self.idle != idle:
            self.idle = idle
            if self._changed is not None:
                self._changed.set()

    def _spawn(self, job: Job) -> None:
        if job.started_at is not None and job.run_at is not None:  # both on the database clock
            wait = (job.started_at - job.run_at).total_seconds()
            _metrics.job_wait(self.source.value, self.kind, wait)
        loop = asyncio.get_running_loop()
        handle = LeaseHandle(self.store, job, self.lease, loop.time(), self._rearm)
        task = loop.create_task(self._run_one(job, handle))
        handle._task = task
        self.in_flight[task] = handle

    async def _run_one(self, job: Job, handle: LeaseHandle) -> None:
        try:
            await self.runner(job, handle)
        except asyncio.CancelledError:
            if not (handle.lost or handle.shutdown_cancelled):
                raise
        except Exception as exc:
            self.stats.errors += 1
            log_failure(
                log,
                exc,
                "%r: runner raised for job %s; it is left to lease expiry and reaping",
                self,
                job.id,
            )
        finally:
            self.in_flight.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self._free_slot()
            if not self.in_flight and self._changed is not None:
                self._changed.set()

    def _free_slot(self) -> None:
        self._slot_freed.set()
        if not self.backlog:  # with a backlog, the lease loop takes the slot
            self._spare()

    def _spare(self) -> None:
        for listener in self.spare_listeners:
            listener()

    async def _heartbeat_loop(self) -> None:
        """Renew every in-flight lease that is due (about every ``lease / 3``).

        Heartbeat-only leases are never renewed here; once one lapsed, its
        runner is cancelled (its job belongs to the reaper now).
        """
        loop = asyncio.get_running_loop()
        while True:
            self._rearm.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._tick(loop.time())):
                    await self._rearm.wait()
            now = loop.time()
            due: list[LeaseHandle] = []
            for h in list(self.in_flight.values()):
                if h.lapsed(now):
                    self._lapse(h)
                elif not (h.heartbeat_only or h.lost) and h.next_beat <= now:
                    due.append(h)
            if due:
                await asyncio.gather(*(self._beat(h) for h in due))

    def _tick(self, now: float) -> float:
        """Seconds until the next check: a sixth of the lease, or sooner when a
        heartbeat-only lease may lapse first."""
        tick = self.lease.total_seconds() / 6
        for h in self.in_flight.values():
            if h.heartbeat_only and not h.lost:
                tick = min(tick, h.expires_at - now)
        return max(tick, 0.01)

    def _lapse(self, handle: LeaseHandle) -> None:
        self.stats.lost += 1
        log.warning(
            "%r: job %s sent no heartbeat within %.3gs; its lease lapsed and its run was cancelled",
            self,
            handle.id,
            handle.lease.total_seconds(),
        )
        handle.mark_lost()

    async def _beat(self, handle: LeaseHandle) -> None:
        try:
            await handle.extend()
            self.stats.heartbeats += 1
        except Exception as exc:
            if handle.settled():
                return  # the ack committed while this renewal was on its way
            if handle.lost or is_not_found(exc):
                self.stats.lost += 1
                log.warning(
                    "%r: lease of job %s lost; its attempt here is cancelled if still running"
                    "; a report it sends is checked against the new lease",
                    self,
                    handle.id,
                )
            else:
                log_failure(
                    log,
                    exc,
                    "%r: heartbeat of job %s failed",
                    self,
                    handle.id,
                    level=logging.WARNING,
                    traceback=False,
                )

    async def drain(self, grace: float) -> tuple[int, int]:
        """Wait up to ``grace`` seconds for in-flight jobs, then cancel and release the rest.

        Call after :meth:`stop` and after :meth:`run` returned (so nothing new
        is leased). Leases stay renewed while jobs finish. Released jobs go
        back to pending with their attempt given back (contract ``Release``),
        so another worker re-runs them at once.

        Returns:
            ``(finished, released)``: the jobs in flight that ended within
            ``grace``, and those cancelled after it whose release was written.
        """
        self.stop()
        try:
            tasks = list(self.in_flight)
            pending: set[asyncio.Task[None]] = set()
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=grace)
            finished = len(tasks) - len(pending)
            if not pending:
                return finished, 0
            handles = [self.in_flight[t] for t in pending if t in self.in_flight]
            for h in handles:
                h.shutdown_cancelled = True
            for t in pending:
                t.cancel()
            _, stuck = await asyncio.wait(pending, timeout=CANCEL_WAIT)
            if stuck:
                log.error(
                    "%r: %d job(s) ignored cancellation for %.0fs; releasing them anyway "
                    "(their late settles will be fenced off)",
                    self,
                    len(stuck),
                    CANCEL_WAIT,
                )
            released = await asyncio.gather(*(self._release(h) for h in handles))
            return finished, sum(released)
        finally:
            await self._stop_heartbeats()

    async def _release(self, handle: LeaseHandle) -> bool:
        try:
            await self.store.release(handle.id, handle.token)
            self.stats.released += 1
            return True
        except Exception as exc:
            if not is_not_found(exc):
                log_failure(
                    log,
                    exc,
                    "%r: release of job %s failed",
                    self,
                    handle.id,
                    level=logging.WARNING,
                    traceback=False,
                )
            return False
