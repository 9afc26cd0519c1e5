"""The DAG runtime of a :class:`azync_flow.worker.Worker`.

One lease loop per handler kind runs tasks through :class:`DAGRunner`; the
scheduler tick is a leader-only maintenance step (its own election), run on
the maintenance interval as the polling fallback and at once when a
``dag:$tick`` / ``dag:$settled`` NOTIFY arrives on the leader.

Do not also call ``worker.maintain_source(Source.DAG)``: the tick already
promotes due DAG tasks (skipping paused runs and sleep timers) and reaps their
expired leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from opentelemetry.trace import TracerProvider

from .._logging import log_failure
from ..retry import RetryPolicy
from ..store.queue import Job, Source
from ..telemetry import flush_spans_on_stop
from ..worker import Worker
from ._definition import DAG
from ._runner import DAGRunner
from ._scheduler import DAGScheduler, DAGWorkerStore

log = logging.getLogger("azync_flow.dag")

#: Election name of the DAG scheduler among workers.
DAG_LEADERSHIP = "azync_flow.dag"


class DAGWorkerBinding:
    """The DAG runtime inside a worker: task loops plus the leader-only tick.

    Built by ``attach_dags(worker, dags, ...)`` before the worker starts.

    Args:
        worker: an ``azync_flow.worker.Worker`` that has not started.
        dags: the definitions whose tasks and compensations this worker runs.
        concurrency: per-kind limit (default: the worker's).
        tick_interval: polling period of the leader's scheduler tick.
        retry: backoff between failed task attempts.
        leadership: election name of the scheduler tick.
        max_reaps: lease expiries a task attempt survives before it dies.
        tracer_provider: where the attempt spans go (None: the global provider).
    """

    def __init__(
        self,
        worker: Worker,
        dags: Iterable[DAG],
        *,
        concurrency: int | None = None,
        tick_interval: timedelta = timedelta(seconds=1),
        retry: RetryPolicy | None = None,
        leadership: str = DAG_LEADERSHIP,
        max_reaps: int = 5,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.worker = worker
        self.leadership = leadership
        store = worker.store
        if not isinstance(store, DAGWorkerStore):
            raise TypeError("the worker's store does not implement DAGWorkerStore (the DAG roles)")
        self.runner = DAGRunner(
            store,
            dags,
            default_max_attempts=worker.max_attempts,
            retry=retry,
            release_on_cancel=False,
            tracer_provider=tracer_provider,
        )
        self.scheduler = DAGScheduler(store, max_reaps=max_reaps, tracer_provider=tracer_provider)
        flush_spans_on_stop(worker, tracer_provider)
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        self._fast: asyncio.Task[None] | None = None
        self._fast_dirty = False
        self._step_dirty = False
        self._woken_changes = 0
        for kind in self.runner.kinds:
            worker.add_loop(Source.DAG, kind, self._run, concurrency=concurrency)
        worker.add_maintenance(
            self.step,
            name="dag.tick",
            interval=tick_interval,
            leadership=leadership,
            source=Source.DAG,
        )
        for hint in ("$tick", "$settled"):
            worker.wakeups.route(Source.DAG, hint, self._poke)

    async def _run(self, job: Job, lease: Any) -> None:
        await self.runner.run_task(job, None)  # the worker's loop renews the lease

    async def step(self, max_rounds: int = 10) -> int:
        """The maintenance step: tick until a pass changes nothing (bounded).

        Waits for wake-triggered work still in flight first, and counts what
        it made runnable since the previous step, so a caller deciding
        "nothing left to do" (``Worker.run_until_idle``) never misses it.
        Returns the number of changes made.
        """
        for task in (self._fast, self._pending):
            if task is not None and not task.done():
                with contextlib.suppress(Exception):
                    await task
        total = await self._tick_rounds(max_rounds)
        total += self._woken_changes
        self._woken_changes = 0
        return total

    async def _tick_rounds(self, max_rounds: int = 10) -> int:
        """Tick until a pass changes nothing; poke DAG loops after each productive pass."""
        total = 0
        async with self._lock:
            for _ in range(max_rounds):
                s = await self.scheduler.tick()
                if s.promoted or s.due or s.reaped or s.failures:
                    self.worker.maintenance.on_runnable(Source.DAG)
                total += s.promoted + s.signals + s.sleeps + s.due + s.reaped + s.settled
                total += len(s.failures)
                if not s.changed:
                    break
        return total

    def _poke(self) -> None:
        if not self.worker.maintenance.is_leader(self.leadership):
            return
        # Dirty flags, not plain coalescing: a wake arriving while a pass runs
        # (whose snapshot may predate the change) forces one more pass.
        self._fast_dirty = self._step_dirty = True
        loop = asyncio.get_running_loop()
        # Tasks copy the context: their ticks are fenced by the current term.
        with self.worker.maintenance.fenced(self.leadership):
            if self._fast is None or self._fast.done():
                self._fast = loop.create_task(self._promote())
            if self._pending is None or self._pending.done():
                self._pending = loop.create_task(self._woken())

    async def _promote(self) -> None:
        """Promote at once (next task starts) while a full tick may still be running."""
        while self._fast_dirty and getattr(self.worker, "running", True):
            self._fast_dirty = False
            try:
                promoted = await self.scheduler.promote_now()
                if promoted > 0:
                    self._woken_changes += promoted
                    self.worker.maintenance.on_runnable(Source.DAG)
            except Exception as e:
                log_failure(
                    log, e, "woken dag promotion failed", level=logging.WARNING, traceback=False
                )

    async def _woken(self) -> None:
        while self._step_dirty and getattr(self.worker, "running", True):
            self._step_dirty = False
            try:
                self._woken_changes += await self._tick_rounds()
            except Exception as e:  # the periodic step retries; never kill the wake hub
                log_failure(log, e, "woken dag tick failed", level=logging.WARNING, traceback=False)

    async def close(self) -> None:
        """Wait for wake-triggered work still running."""
        for task in (self._fast, self._pending):
            if task is not None:
                with contextlib.suppress(Exception):
                    await task
