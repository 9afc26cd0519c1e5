"""Leader-only periodic maintenance: promote due jobs, reap expired leases, vacuum.

Steps are grouped by *leadership name*. For each group a worker tries to
acquire the store's advisory-lock leadership (contract ``LeaseElector``); only
the holder runs the group's steps, and it re-checks ``valid()`` on every tick,
so a leader whose session died stops at once and another worker takes over.
Any live worker can become leader, so no single process can stall recovery
(scenario C15).

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
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from .._logging import log_failure
from ..store.types import Source

if TYPE_CHECKING:
    from ._store import LeadershipLease, WorkerStore

__all__ = ["DEFAULT_LEADERSHIP", "MaintenanceStep", "Retention"]

log = logging.getLogger("azync_flow.worker")

#: Leadership name of the built-in queue maintenance.
DEFAULT_LEADERSHIP = "azync_flow.maintenance"

#: Non-leaders try to take over leadership every this many ticks.
LEADER_RETRY_TICKS = 5

#: ``async def step() -> int | None``: one maintenance action. Returning a
#: positive int means "work became runnable" (the worker then pokes its loops).
MaintenanceStep = Callable[[], Awaitable[Any]]


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """How long settled data is kept by the vacuum steps (``<= 0`` keeps forever).

    Attributes:
        completed: succeeded jobs (DAG- and workflow-owned jobs are exempt).
        stats: daily throughput counters.
    """

    completed: timedelta = timedelta(days=7)
    stats: timedelta = timedelta(days=90)


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
    next_try: float = 0.0


class Maintenance:
    """Runs maintenance steps on the leader of each leadership group."""

    def __init__(self, store: WorkerStore, *, tick: timedelta) -> None:
        self.store = store
        self.tick_seconds = tick.total_seconds()
        self.groups: dict[str, _Group] = {}
        self.on_runnable: Callable[[Source | None], None] = lambda _source: None
        self.ticks = 0
        self._lock = asyncio.Lock()

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
                if await self._lead(group, force):
                    total += await self._run_steps(group, force)
            return total

    async def _lead(self, group: _Group, force: bool) -> bool:
        loop = asyncio.get_running_loop()
        if group.lease is not None:
            if await group.lease.valid():
                return True
            # INFO: a database restart ends every session; the store reports outages
            log.info("lost leadership %r; maintenance paused here", group.name)
            group.lease = None
        if not force and loop.time() < group.next_try:
            return False
        # Each attempt opens a session; non-leaders retry at a gentler pace.
        group.next_try = loop.time() + self.tick_seconds * LEADER_RETRY_TICKS
        try:
            group.lease = await self.store.acquire_leadership_lease(group.name)
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
        return group.lease is not None

    async def _run_steps(self, group: _Group, force: bool) -> int:
        now = asyncio.get_running_loop().time()
        total = 0
        for step in group.steps:
            if not force and now < step.next_due:
                continue
            step.next_due = now + step.interval
            try:
                result = await step.fn()
            except Exception as exc:
                log_failure(log, exc, "maintenance step %r failed", step.name)
                continue
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


def _tag(fn: MaintenanceStep, source: Source | None) -> MaintenanceStep:
    async def step() -> Any:
        result = fn()
        return await result if inspect.isawaitable(result) else result

    step.source = source  # type: ignore[attr-defined]
    return step


def _count(result: Any) -> int:
    if isinstance(result, bool) or result is None:
        return 0
    if isinstance(result, int):
        return result
    if isinstance(result, tuple) and result and isinstance(result[0], int):
        return result[0]
    return 0


def builtin_steps(
    store: WorkerStore, source: Source, *, max_reaps: int, retention: Retention
) -> list[tuple[str, MaintenanceStep, bool]]:
    """The standard steps for one source: ``(name, step, is_vacuum)``."""

    async def promote() -> int:
        return await store.promote_due(source)

    async def reap() -> int:
        reaped, _killed = await store.reap_expired(source, None, max_reaps)
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
