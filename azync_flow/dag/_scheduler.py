"""The DAG scheduler tick (the worker runs it on its leader, see ``attach_dags``).

The tick runs, in this order, ``promote_unblocked``,
``deliver_buffered_signals``, ``complete_due_sleeps``, the DAG-task
housekeeping ``promote_due(Source.DAG)`` and ``dag_reap_expired_tasks``, then
``apply_failure_policy`` and ``complete_dags``. Each step is its own
transaction and correctness does not depend on their order: the store
re-checks everything it acts on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from opentelemetry.trace import TracerProvider

from ..store.dags import (
    DAGAdmin,
    DAGConsumer,
    DAGFailure,
    DAGMaintenance,
    ReapedTask,
    SettledDAG,
)
from ..store.queue import QueueMaintenance, Source
from ..telemetry import AttemptKind, AttemptOutcome, RunKind, RunTracer, end_finished_run

log = logging.getLogger("azync_flow.dag")


@runtime_checkable
class SchedulerStore(DAGMaintenance, QueueMaintenance, Protocol):
    """The roles one tick uses: the DAG steps and the promotion of due tasks."""


@runtime_checkable
class DAGWorkerStore(DAGConsumer, DAGAdmin, SchedulerStore, Protocol):
    """The roles a worker running DAGs needs: run tasks, tick, read runs."""


@dataclass
class TickStats:
    """What one tick did."""

    promoted: int = 0
    signals: int = 0
    sleeps: int = 0
    due: int = 0
    reaped: int = 0
    failures: list[DAGFailure] = field(default_factory=list)
    settled: int = 0

    @property
    def changed(self) -> bool:
        """True when the tick moved anything (another tick may find more to do)."""
        return bool(
            self.promoted
            or self.signals
            or self.sleeps
            or self.due
            or self.reaped
            or self.failures
            or self.settled
        )


class DAGScheduler:
    """Drives DAG runs forward. Run :meth:`tick` on the elected leader only.

    Incremental passes: between full passes (every ``full_scan_interval``,
    on the first tick, and whenever the clock moved backwards), promotion and
    completion only examine DAGs whose header or a task changed since the
    previous tick started, minus ``overlap`` (covering transactions that
    committed late). The periodic full pass is the safety net for anything
    older.

    Args:
        store: the store.
        max_reaps: lease expiries a task survives before it is dead-lettered.
        full_scan_interval: wall time between full passes.
        overlap: how far before the previous tick's start incremental passes look.
        tracer_provider: where the scheduler's spans go (None: the global
            provider): the span of each task attempt lost to lease expiry,
            and the run span of each run it settles.
    """

    def __init__(
        self,
        store: SchedulerStore,
        *,
        max_reaps: int = 5,
        full_scan_interval: timedelta = timedelta(seconds=5),
        overlap: timedelta = timedelta(seconds=2),
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.store = store
        self.tracer = RunTracer(tracer_provider)
        self.max_reaps = max_reaps
        self.full_scan_interval = full_scan_interval
        self.overlap = overlap
        self.ticks = 0
        self.full_ticks = 0
        self._prev: datetime | None = None
        self._last_full = 0.0

    async def tick(self, *, full: bool = False) -> TickStats:
        """Run one scheduler pass (the maintenance step a Worker registers).

        Args:
            full: examine every DAG, not only recently changed ones.
        """
        now = await self.store.current_time()
        mono = time.monotonic()
        if (
            full
            or self._prev is None
            or now < self._prev
            or mono - self._last_full >= self.full_scan_interval.total_seconds()
        ):
            since = None
            self._last_full = mono
            self.full_ticks += 1
        else:
            since = self._prev - self.overlap
        s = TickStats()
        # Promotion first: it is what the next task waits for (latency).
        s.promoted = await self.store.promote_unblocked(since=since)
        s.signals = await self.store.deliver_buffered_signals()
        s.sleeps = await self.store.complete_due_sleeps()
        s.due = await self.store.promote_due(Source.DAG)
        reaped = await self.store.dag_reap_expired_tasks(self.max_reaps)
        s.reaped = len(reaped)
        for r in reaped:
            if r.meta.get("traceparent"):
                self._lost_attempt(r)
        s.failures = await self.store.apply_failure_policy(on_settled=self._settled)
        s.settled = await self.store.complete_dags(since=since, on_settled=self._settled)
        self._prev = now
        self.ticks += 1
        return s

    def _settled(self, run: SettledDAG) -> None:
        """Export the run span of a run this tick settled (the tick's commit won)."""
        end_finished_run(
            self.tracer,
            RunKind.DAG,
            run.name,
            run.id,
            run.trace_context,
            run.created_at,
            run.state,
            run.reason,
        )

    def _lost_attempt(self, r: ReapedTask) -> None:
        """Close the span of a task attempt lost to lease expiry (ERROR ``lease expired``)."""
        comp = r.task_key.startswith("comp:")
        self.tracer.lost_attempt(
            AttemptKind.DAG_COMPENSATION if comp else AttemptKind.DAG_TASK,
            r.task_key.removeprefix("comp:"),
            carrier=r.meta,
            run_id=r.dag_id,
            attempt=r.attempt,
            started_at=r.started_at,
            outcome=AttemptOutcome.DEAD if r.dead else AttemptOutcome.RETRIED,
            dag_name=r.dag_name,
            task_key=r.task_key,
        )

    async def promote_now(self) -> int:
        """Fast path for a wake-up: an incremental :meth:`SchedulerStore.promote_unblocked`.

        Safe next to a running :meth:`tick` (the store re-checks every row it
        moves); it only lets the next task start without waiting for the
        rest of a tick. Returns the number promoted.
        """
        since = None if self._prev is None else self._prev - self.overlap
        return await self.store.promote_unblocked(since=since)
