"""The workflows a :class:`~azync_flow.worker.Worker` of this process runs, as a
client bound to that worker (``Client.for_worker``) uses them: eager starts
(the execution committed with its first pass, run by that worker) and direct
wake-ups of its loops instead of a NOTIFY round trip.

``attach_workflows`` registers the worker's workflow runtime here; the client
looks it up per call, so a client made before the runtime was attached uses it
too. The client knows the runtime only through :class:`LocalWorkflows`.
"""

from __future__ import annotations

import weakref
from typing import Protocol

from azync_flow.store.workflows import StartCommitResult, WorkflowStartParams
from azync_flow.worker import Worker

__all__ = ["LocalWorkflows", "bind_local_workflows", "local_workflows"]


class LocalWorkflows(Protocol):
    """What a client bound to a worker may ask of the workflows that worker runs."""

    def accepts(self, name: str, task_queue: str) -> bool:
        """True while the worker runs, registers workflow ``name`` and serves
        ``task_queue``."""
        ...

    async def start(
        self, params: WorkflowStartParams, trace_context: dict[str, str] | None
    ) -> StartCommitResult:
        """Start the execution with its first pass run and committed by the worker."""
        ...

    def wake_tasks(self) -> None:
        """Look for workflow tasks now (a signal or update was just sent)."""
        ...

    def wake_queries(self) -> None:
        """Look for queries now (one was just asked)."""
        ...


#: The workflows each worker runs (the worker keeps no reference).
_BOUND: weakref.WeakKeyDictionary[Worker, LocalWorkflows] = weakref.WeakKeyDictionary()


def bind_local_workflows(worker: Worker, workflows: LocalWorkflows) -> None:
    """Make ``workflows`` what clients bound to ``worker`` use (one per worker)."""
    _BOUND[worker] = workflows


def local_workflows(worker: Worker | None) -> LocalWorkflows | None:
    """The workflows bound to ``worker`` (None: no worker, or none bound)."""
    return None if worker is None else _BOUND.get(worker)
