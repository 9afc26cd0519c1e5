"""Drive DAG runs to a settled state in-process (tests, samples, benchmarks)."""

from __future__ import annotations

import asyncio
import time
import uuid

from ..store.dags import DAGAdmin, DAGState, DAGView
from ._runner import DAGRunner
from ._scheduler import DAGScheduler, SchedulerStore

#: States in which a run needs an operator (or nothing) to move on.
SETTLED = frozenset(
    {DAGState.SUCCEEDED, DAGState.FAILED, DAGState.CANCELLED, DAGState.SUSPENDED, DAGState.PAUSED}
)


async def run_until_settled(
    store: DAGAdmin,
    runner: DAGRunner,
    run_id: uuid.UUID,
    *,
    scheduler: DAGScheduler | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 - a bound on the whole drive loop
    idle_sleep: float = 0.01,
    until: frozenset[DAGState] = SETTLED,
) -> DAGView:
    """Alternate scheduler ticks and task batches until the run reaches ``until``.

    The run must also be quiet: a round that leased nothing and changed
    nothing, confirmed by a full scheduler pass. Sleeps ``idle_sleep`` seconds
    between idle rounds (timers,
    backoff delays on the backend clock).

    Raises:
        TimeoutError: the run did not settle within ``timeout`` seconds.
    """
    if scheduler is None:
        if not isinstance(store, SchedulerStore):
            raise TypeError("pass a scheduler, or a store that implements SchedulerStore")
        scheduler = DAGScheduler(store)
    deadline = time.monotonic() + timeout
    while True:
        stats = await scheduler.tick()
        ran = await runner.run_batch()
        view: DAGView = await store.get_dag(run_id)
        if view.state in until and not ran and not stats.changed:
            if not (await scheduler.tick(full=True)).changed:
                return view
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"dag run {run_id} did not settle (state {view.state})")
        if not ran and not stats.changed:
            await asyncio.sleep(idle_sleep)
