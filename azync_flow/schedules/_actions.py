"""Starting, watching and cancelling the runs schedules start.

The scheduler starts queue jobs itself; workflow executions and DAG runs it
starts through a :class:`RunStarter` it is given (the composition root builds
one on the client and the DAG client), so schedules import neither.
"""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

from azync_flow.errors import ConflictError, IdempotencyConflictError, NotFoundError
from azync_flow.store.dags import DAGState
from azync_flow.store.queue import LIVE_JOB_STATES, EnqueueParams, Source
from azync_flow.store.workflows import WorkflowState

from ._model import Action, EnqueueJob, StartDAG, StartWorkflow
from ._store import ScheduleRuntimeStore

__all__ = ["ActionRunner", "RunStarter", "run_state"]

log = logging.getLogger("azync_flow.schedules")

_LIVE_WORKFLOW = frozenset({WorkflowState.RUNNING, WorkflowState.SUSPENDED})
_LIVE_DAG = frozenset(
    {DAGState.RUNNING, DAGState.SUSPENDED, DAGState.COMPENSATING, DAGState.PAUSED}
)


class RunStarter(Protocol):
    """What the scheduler needs to start workflow executions and DAG runs."""

    async def start_workflow(
        self, action: StartWorkflow, run_id: uuid.UUID, meta: dict[str, str]
    ) -> bool:
        """Start execution ``run_id`` of the action's workflow; False when it exists.

        Raises:
            IdempotencyConflictError: ``run_id`` is an execution with other input.
        """
        ...

    async def start_dag(
        self, action: StartDAG, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        """Start run ``run_id`` (idempotency key ``key``) of the action's DAG; False
        when it exists.

        Raises:
            ScheduleError: the starter does not know the DAG.
            ConflictError: the id or key is taken by another run.
        """
        ...

    async def cancel_dag(self, run_id: uuid.UUID) -> None:
        """Cancel DAG run ``run_id``.

        Raises:
            NotFoundError: no such live run.
        """
        ...


class ActionRunner:
    """Starts the run of an action for one nominal time, idempotently by run id.

    Args:
        store: the store (workflow, DAG and queue verbs).
        starter: starts workflow executions and DAG runs.
    """

    def __init__(self, store: ScheduleRuntimeStore, starter: RunStarter) -> None:
        self.store = store
        self.starter = starter

    async def start(
        self, action: Action, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        """Start the run ``run_id``; False when it existed already (nothing new).

        Raises:
            ScheduleError: a ``StartDAG`` names a DAG the starter does not know.
        """
        if isinstance(action, StartWorkflow):
            return await self._start_workflow(action, run_id, meta)
        if isinstance(action, StartDAG):
            return await self._start_dag(action, run_id, key, meta)
        return await self._enqueue(action, run_id, key, meta)

    async def _start_workflow(
        self, action: StartWorkflow, run_id: uuid.UUID, meta: dict[str, str]
    ) -> bool:
        try:
            return await self.starter.start_workflow(action, run_id, meta)
        except IdempotencyConflictError:
            # the id is taken by an execution with other input (a re-created
            # schedule with a new input): that execution is this nominal time's run
            log.warning("scheduled execution %s exists with another input", run_id)
            return False

    async def _start_dag(
        self, action: StartDAG, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        try:
            await self.store.get_dag(run_id)
            return False
        except NotFoundError:
            pass
        try:
            return await self.starter.start_dag(action, run_id, key, meta)
        except ConflictError:
            return False

    async def _enqueue(
        self, action: EnqueueJob, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        params = EnqueueParams(
            id=run_id,
            kind=action.kind,
            payload=bytes(action.payload),
            meta=meta,
            idempotency_key=key,
        )
        try:
            return bool(await self.store.enqueue(params))
        except ConflictError:
            return False

    async def running(self, action: Action, run_id: uuid.UUID) -> bool:
        """True while the run is live (not finished, not vacuumed)."""
        state = await run_state(self.store, action, run_id)
        if isinstance(action, StartWorkflow):
            return state in _LIVE_WORKFLOW
        if isinstance(action, StartDAG):
            return state in _LIVE_DAG
        return state in LIVE_JOB_STATES

    async def cancel(self, action: Action, run_id: uuid.UUID) -> None:
        """Cancel a live workflow execution or DAG run (a finished one is left)."""
        try:
            if isinstance(action, StartWorkflow):
                await self.store.cancel_workflow_execution(run_id)
            elif isinstance(action, StartDAG):
                await self.starter.cancel_dag(run_id)
        except NotFoundError:
            pass


async def run_state(store: ScheduleRuntimeStore, action: Action, run_id: uuid.UUID) -> str:
    """The state of the run ``action`` started as ``run_id`` (``running``,
    ``succeeded``, ...; ``gone`` when not found)."""
    try:
        if isinstance(action, StartWorkflow):
            return str((await store.get_workflow_execution(run_id)).state)
        if isinstance(action, StartDAG):
            return str((await store.get_dag(run_id)).state)
        return str((await store.get_job(Source.QUEUE, run_id)).state)
    except NotFoundError:
        return "gone"
