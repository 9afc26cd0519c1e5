"""Starting, watching and cancelling the runs schedules start."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from azync_flow.errors import (
    ConflictError,
    IdempotencyConflictError,
    NotFoundError,
    ScheduleError,
)
from azync_flow.store.dags import DAGState
from azync_flow.store.queue import LIVE_JOB_STATES, EnqueueParams, Source
from azync_flow.store.workflows import WorkflowState

from ._model import Action, EnqueueJob, StartDAG, StartWorkflow

if TYPE_CHECKING:
    from azync_flow.dag import DAG

__all__ = ["ActionRunner"]

log = logging.getLogger("azync_flow.schedules")

_LIVE_WORKFLOW = frozenset({WorkflowState.RUNNING, WorkflowState.SUSPENDED})
_LIVE_DAG = frozenset(
    {DAGState.RUNNING, DAGState.SUSPENDED, DAGState.COMPENSATING, DAGState.PAUSED}
)


class ActionRunner:
    """Starts the run of an action for one nominal time, idempotently by run id.

    Args:
        store: the store (workflow, DAG and queue verbs).
        dags: DAG definitions by name (what ``StartDAG`` actions may start).
    """

    def __init__(self, store: Any, dags: Mapping[str, DAG] | None = None) -> None:
        self.store = store
        self.dags: dict[str, DAG] = dict(dags or {})

    async def start(
        self, action: Action, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        """Start the run ``run_id``; False when it existed already (nothing new).

        Raises:
            ScheduleError: a ``StartDAG`` names a DAG this runner does not know.
        """
        if isinstance(action, StartWorkflow):
            return await self._start_workflow(action, run_id, meta)
        if isinstance(action, StartDAG):
            return await self._start_dag(action, run_id, key, meta)
        return await self._enqueue(action, run_id, key, meta)

    async def _start_workflow(
        self, action: StartWorkflow, run_id: uuid.UUID, meta: dict[str, str]
    ) -> bool:
        from azync_flow.client import Client

        try:
            handle = await Client(self.store).start(
                action.workflow, action.input, id=run_id, meta=meta, version=action.version
            )
        except IdempotencyConflictError:
            # the id is taken by an execution with other input (a re-created
            # schedule with a new input): that execution is this nominal time's run
            log.warning("scheduled execution %s exists with another input", run_id)
            return False
        return handle.started

    async def _start_dag(
        self, action: StartDAG, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        from azync_flow.dag import DAGClient

        dag = self.dags.get(action.dag)
        if dag is None:
            raise ScheduleError(
                f"no DAG named {action.dag!r} here: attach_schedules(worker, dags=[...]) "
                "must list the DAGs schedules start"
            )
        try:
            await self.store.get_dag(run_id)
            return False
        except NotFoundError:
            pass
        try:
            run = await DAGClient(self.store).run(
                dag, action.input, id=run_id, idempotency_key=key, meta=meta
            )
        except ConflictError:
            return False
        return run.inserted

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

    async def state(self, action: Action, run_id: uuid.UUID) -> str:
        """The run's state (``running``, ``succeeded``, ...; ``gone`` when not found)."""
        try:
            if isinstance(action, StartWorkflow):
                return str((await self.store.get_workflow_execution(run_id)).state)
            if isinstance(action, StartDAG):
                return str((await self.store.get_dag(run_id)).state)
            return str((await self.store.get_job(Source.QUEUE, run_id)).state)
        except NotFoundError:
            return "gone"

    async def running(self, action: Action, run_id: uuid.UUID) -> bool:
        """True while the run is live (not finished, not vacuumed)."""
        state = await self.state(action, run_id)
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
                from azync_flow.dag import DAGClient

                await DAGClient(self.store).cancel(run_id)
        except NotFoundError:
            pass
