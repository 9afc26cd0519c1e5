"""Run the scheduler on a worker (leader only)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ._actions import ActionRunner
from ._model import StartWorkflow
from ._scheduler import SCHEDULE_LEADERSHIP, Scheduler

__all__ = ["attach_schedules", "declared_schedule_id"]

_ATTACHED: weakref.WeakKeyDictionary[Any, Scheduler] = weakref.WeakKeyDictionary()


def declared_schedule_id(workflow_name: str) -> str:
    """The id of the schedule ``@workflow(schedule=...)`` declares."""
    return f"workflow:{workflow_name}"


def attach_schedules(
    worker: Any,
    *,
    workflows: Iterable[Any] = (),
    dags: Iterable[Any] = (),
    interval: timedelta | None = None,
) -> Scheduler:
    """Run the scheduler on ``worker``: a maintenance step under its own
    election (``azync_flow.schedule``), so one worker at a time fires schedules.

    Calling it again on the same worker adds to the same scheduler. Workers
    with workflows (``attach_workflows``) call it themselves.

    Args:
        worker: a :class:`~azync_flow.worker.Worker` that has not started.
        workflows: ``@workflow`` definitions; those declared with
            ``schedule=`` get their schedule (id ``workflow:<name>``) created
            or updated on the leader's first tick.
        dags: the DAGs ``StartDAG`` actions may start.
        interval: tick of the step (default: the maintenance tick).

    Returns:
        The :class:`Scheduler` (``await scheduler.run_once()`` steps it).
    """
    scheduler = _ATTACHED.get(worker)
    if scheduler is None:
        scheduler = Scheduler(worker.store, ActionRunner(worker.store))
        worker.add_maintenance(
            scheduler.run_once,
            name="schedule.tick",
            interval=interval,
            leadership=SCHEDULE_LEADERSHIP,
        )
        _ATTACHED[worker] = scheduler
    for dag in dags:
        scheduler.actions.dags[dag.name] = dag
    scheduler.declare(
        (declared_schedule_id(w.name), {**w.schedule, "action": StartWorkflow.of(w)})
        for w in workflows
        if getattr(w, "schedule", None) is not None
    )
    return scheduler
