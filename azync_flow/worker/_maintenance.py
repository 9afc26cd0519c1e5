"""Leader-only periodic maintenance: promote due jobs, reap expired leases, fold
the counter deltas into the daily stats, vacuum.

Steps are grouped by *leadership name*. For each group a worker tries, every
tick, to acquire the store's leadership lease (contract ``LeaseElector``: a
lease on the backend clock with a term); only the holder runs the group's
steps. The holder renews the lease every tick (and between long steps) and
runs each step inside ``lease.fenced()``, so once its term is over (a frozen
process whose TTL ran out, a takeover) its statements fail with
``LeadershipLostError`` instead of writing, it stops at once and another
worker, having taken over after the TTL, runs the steps. No single process can
stall recovery, however long it is frozen.

Other runtimes add their own steps with :meth:`Worker.add_maintenance` — for
example the DAG scheduler tick or the stalled-workflow repair. A runtime
whose steps must run whenever any of *its* workers is alive should use its
own leadership name (``"azync_flow.dag"``), so a worker that lacks the runtime
cannot win the election and leave the steps unrun.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _metrics
from .._logging import log_failure
from ..errors import LeadershipLostError
from ..store.leadership import DEFAULT_LEADER_TTL
from ..store.queue import Source

if TYPE_CHECKING:
    from ..store.leadership import LeadershipLease
    from ._store import WorkerStore

__all__ = ["DEFAULT_LEADERSHIP", "MaintenanceStep", "Retention"]

log = logging.getLogger("azync_flow.worker")

#: Leadership name of the built-in queue maintenance.
DEFAULT_LEADERSHIP = "azync_flow.maintenance"

#: Leadership name of the counter fold (every worker takes part: it covers every
#: source, so whichever worker leads, every counted delta gets folded).
STATS_LEADERSHIP = "azync_flow.stats"

#: Counter delta rows folded per statement by the ``stats.fold`` step,
#: and the most statements per tick: a tick's fold stays bounded, and a backlog
#: drains over the next ticks (reads are exact meanwhile).
STATS_FOLD_BATCH = 5_000
STATS_FOLD_ROUNDS = 4

#: ``async def step() -> int | None``: one maintenance action. Returning a
#: positive int means "work became runnable" (the worker then pokes its loops).
MaintenanceStep = Callable[[], Awaitable[Any]]


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """How long settled data is kept by the vacuum steps (``<= 0`` keeps forever).

    Attributes:
        completed: succeeded jobs (DAG- and workflow-owned jobs are exempt).
        stats: daily throughput counters.
        limit_slots: the slots of a limit's key that none holds and that
            admitted nothing for this long (a key used again gets new ones).
    """

    completed: timedelta = timedelta(days=7)
    stats: timedelta = timedelta(days=90)
    limit_slots: timedelta = timedelta(hours=1)


@dataclass(slots=True)
class _Step:
    name: str
    fn: MaintenanceStep
    interval: float
    leadership: str
    next_due: float = 0.0


@dataclass(slots=True)
class _Group:
    name: str
    steps: list[_Step] = field(default_factory=list)
    lease: LeadershipLease | None = None


class Maintenance:
    """Runs maintenance steps on the leader of each leadership group."""

    def __init__(
        self, store: WorkerStore, *, tick: timedelta, leader_ttl: timedelta | None = None
    ) -> None:
        ttl = leader_ttl if leader_ttl is not None else max(DEFAULT_LEADER_TTL, tick * 3)
        if ttl < tick * 2:
            raise ValueError(
                f"leader_ttl ({ttl.total_seconds()}s) must be at least twice the "
                f"maintenance tick ({tick.total_seconds()}s): the leader renews once per tick"
            )
        self.store = store
        self.tick_seconds = tick.total_seconds()
        self.leader_ttl = ttl
        self.groups: dict[str, _Group] = {}
        self.on_runnable: Callable[[Source | None], None] = lambda _source: None
        self.ticks = 0
        #: Who leads, for operators and for the take-back of a restarted
        #: identity ("" = the store's default, "<host>:<pid>").
        self.holder = ""
        self._lock = asyncio.Lock()
        _metrics.leadership_held(self._held)

    def _held(self) -> list[tuple[str, bool]]:
        return [(g.name, g.lease is not None) for g in self.groups.values()]

    def add(
        self,
        fn: MaintenanceStep,
        *,
        name: str,
        interval: timedelta,
        leadership: str,
        source: Source | None = None,
    ) -> None:
        if any(s.name == name for g in self.groups.values() for s in g.steps):
            raise ValueError(f"a maintenance step named {name!r} is already registered")
        group = self.groups.setdefault(leadership, _Group(leadership))
        step = _Step(name, fn, interval.total_seconds(), leadership)
        step_source: Any = source
        step.fn = _tag(fn, step_source)
        group.steps.append(step)

    def is_leader(self, leadership: str = DEFAULT_LEADERSHIP) -> bool:
        group = self.groups.get(leadership)
        return group is not None and group.lease is not None

    def fenced(self, leadership: str) -> AbstractContextManager[None]:
        """Fence the store statements made in the block (and by tasks created in
        it) by this worker's current term of ``leadership``, as the steps are.

        Raises:
            LeadershipLostError: this worker does not lead ``leadership``.
        """
        group = self.groups.get(leadership)
        if group is None or group.lease is None:
            raise LeadershipLostError(f"this worker does not lead {leadership!r}")
        return group.lease.fenced()

    async def run(self, stopping: asyncio.Event) -> None:
        """Tick every ``tick`` until ``stopping`` is set, then give up leadership."""
        try:
            while not stopping.is_set():
                await self.tick()
                try:
                    async with asyncio.timeout(self.tick_seconds):
                        await stopping.wait()
                except TimeoutError:
                    pass
        finally:
            await self.release()

    async def tick(self, *, force: bool = False) -> int:
        """Run every due step of every group this worker leads.

        Args:
            force: run all steps now regardless of their interval.

        Returns:
            The sum of the positive counts the steps returned.
        """
        async with self._lock:
            self.ticks += 1
            total = 0
            for group in self.groups.values():
                if await self._lead(group):
                    total += await self._run_steps(group, force)
            return total

    async def _lead(self, group: _Group) -> bool:
        if group.lease is not None:
            if await group.lease.valid():
                return True
            self._lost(group)
        try:
            group.lease = await self.store.acquire_leadership_lease(
                group.name, self.leader_ttl, holder=self.holder
            )
        except Exception as exc:
            log_failure(
                log,
                exc,
                "leadership %r: acquire failed",
                group.name,
                level=logging.WARNING,
                traceback=False,
            )
            return False
        if group.lease is not None:
            log.info("acquired leadership %r", group.name)
            _metrics.leadership_changed(group.name, "acquired")
        return group.lease is not None

    def _lost(self, group: _Group) -> None:
        log.warning("lost leadership %r; maintenance paused here", group.name)
        group.lease = None
        _metrics.leadership_changed(group.name, "lost")

    async def _run_steps(self, group: _Group, force: bool) -> int:
        now = asyncio.get_running_loop().time()
        total = 0
        for step in group.steps:
            if not force and now < step.next_due:
                continue
            lease = group.lease
            if lease is None or not await lease.renew_if_due():
                self._lost(group)
                break
            step.next_due = now + step.interval
            try:
                with lease.fenced():
                    result = await step.fn()
            except Exception as exc:
                if not _is_leadership_lost(exc):
                    log_failure(log, exc, "maintenance step %r failed", step.name)
                    continue
                self._lost(group)
                break
            count = _count(result)
            if count > 0:
                total += count
                self.on_runnable(getattr(step.fn, "source", None))
        return total

    async def release(self) -> None:
        """Give up every leadership held."""
        async with self._lock:
            await self._release()

    async def _release(self) -> None:
        for group in self.groups.values():
            lease, group.lease = group.lease, None
            if lease is not None:
                await lease.release()
                _metrics.leadership_changed(group.name, "released")


def _tag(fn: MaintenanceStep, source: Source | None) -> MaintenanceStep:
    async def step() -> Any:
        result = fn()
        return await result if inspect.isawaitable(result) else result

    step.source = source  # type: ignore[attr-defined]
    return step


def _is_leadership_lost(err: BaseException | None) -> bool:
    while err is not None:
        if isinstance(err, LeadershipLostError):
            return True
        err = err.__cause__ or err.__context__
    return False


def _count(result: Any) -> int:
    if isinstance(result, bool) or result is None:
        return 0
    if isinstance(result, int):
        return result
    if isinstance(result, tuple) and result and isinstance(result[0], int):
        return result[0]
    return 0


#: What the built-in reaper of a source reaps (the ``azync.kind`` of ``azync_flow.reaps``).
_REAPED_KIND = {Source.QUEUE: "job", Source.EVENT: "event.delivery"}


def builtin_steps(
    store: WorkerStore, source: Source, *, max_reaps: int, retention: Retention
) -> list[tuple[str, MaintenanceStep, bool]]:
    """The standard steps for one source: ``(name, step, is_vacuum)``."""

    async def promote() -> int:
        return await store.promote_due(source)

    reaped_kind = _REAPED_KIND.get(source, str(source))

    async def reap() -> int:
        reaped, killed = await store.reap_expired(source, None, max_reaps)
        _metrics.reaped(reaped_kind, "retried", reaped - killed)  # killed: the dead subset
        _metrics.reaped(reaped_kind, "dead", killed)
        return reaped

    async def vacuum() -> int:
        await store.vacuum_completed(source, retention.completed)
        await store.vacuum_stats(source, retention.stats)
        await store.vacuum_idempotency(source)
        return 0

    return [
        (f"{source}.promote_due", promote, False),
        (f"{source}.reap_expired", reap, False),
        (f"{source}.vacuum", vacuum, True),
    ]


def limit_slots_step(store: WorkerStore, retention: Retention) -> MaintenanceStep:
    """The ``limits.vacuum`` step: delete the slots of idle limit keys
    (:attr:`Retention.limit_slots`), so keys seen once do not stay forever."""

    async def vacuum() -> int:
        if retention.limit_slots > timedelta(0):
            await store.vacuum_limit_slots(retention.limit_slots)
        return 0  # deleting idle slots makes no job runnable

    return vacuum


def fold_stats_step(store: WorkerStore) -> MaintenanceStep:
    """The ``stats.fold`` step: fold the recorded counter deltas into the daily
    counters, at most :data:`STATS_FOLD_ROUNDS` batches of
    :data:`STATS_FOLD_BATCH` rows per tick (a backlog drains over the next
    ticks; reads are exact meanwhile)."""

    async def fold() -> int:
        for _ in range(STATS_FOLD_ROUNDS):
            if await store.fold_stats(STATS_FOLD_BATCH) < STATS_FOLD_BATCH:
                break
        return 0  # counting makes no job runnable

    return fold


#: Default period of the ``metrics.backlog`` step.
BACKLOG_INTERVAL = timedelta(seconds=15)


def backlog_step(store: WorkerStore, interval: timedelta) -> MaintenanceStep:
    """The ``metrics.backlog`` step: one :meth:`~WorkerStore.backlog` query per
    ``interval`` feeding the backlog gauges (``azync_flow.job.pending`` ...),
    on the leader of the stats election only, and only once a meter provider is
    installed (no query at all otherwise)."""

    async def sample() -> int:
        if not _metrics.metrics_enabled():
            return 0
        _metrics.record_backlog(await store.backlog(), interval.total_seconds())
        return 0  # a gauge makes no job runnable

    return sample
