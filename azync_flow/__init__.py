"""azync_flow: durable execution for Python on PostgreSQL.

The public names below are imported on first use, so ``import azync_flow``
(and the pytest plugin in :mod:`azync_flow.testing`, loaded in every pytest
session of a project that installs azync_flow) costs next to nothing.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from azync_flow.client import Client
    from azync_flow.dag import DAG, DAGClient, TaskContext, attach_dags
    from azync_flow.errors import (
        ActivityError,
        AzyncError,
        ChildWorkflowError,
        DAGValidationError,
        NonDeterminismError,
        NotReady,
        QueryFailedError,
        QueryNotFoundError,
        QueryTimeoutError,
        SchemaNotMigratedError,
        Skip,
        StoreUnavailableError,
        Uncertain,
        UpdateFailedError,
        UpdateRejectedError,
        WorkflowCancelledError,
        WorkflowFailedError,
        WorkflowTerminatedError,
    )
    from azync_flow.events import EventContext, attach_subscribers, subscriber
    from azync_flow.replay import Replayer
    from azync_flow.retry import RetryPolicy
    from azync_flow.runtime.activity_runner import current_activity
    from azync_flow.runtime.uncertain import Reconciled
    from azync_flow.runtime.worker_runtime import attach_workflows
    from azync_flow.schedules import ScheduleSpec, StartWorkflow, attach_schedules
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store
    from azync_flow.worker import Worker
    from azync_flow.workflow import (
        ActivityOptions,
        Registry,
        WorkflowContext,
        activity,
        workflow,
    )

#: Public name -> the module that defines it.
_HOMES = {
    "Client": "azync_flow.client",
    "DAG": "azync_flow.dag",
    "DAGClient": "azync_flow.dag",
    "DAGValidationError": "azync_flow.errors",
    "NotReady": "azync_flow.errors",
    "Skip": "azync_flow.errors",
    "TaskContext": "azync_flow.dag",
    "attach_dags": "azync_flow.dag",
    "ActivityError": "azync_flow.errors",
    "AzyncError": "azync_flow.errors",
    "ChildWorkflowError": "azync_flow.errors",
    "NonDeterminismError": "azync_flow.errors",
    "QueryFailedError": "azync_flow.errors",
    "QueryNotFoundError": "azync_flow.errors",
    "QueryTimeoutError": "azync_flow.errors",
    "SchemaNotMigratedError": "azync_flow.errors",
    "StoreUnavailableError": "azync_flow.errors",
    "Uncertain": "azync_flow.errors",
    "UpdateFailedError": "azync_flow.errors",
    "UpdateRejectedError": "azync_flow.errors",
    "WorkflowCancelledError": "azync_flow.errors",
    "WorkflowFailedError": "azync_flow.errors",
    "WorkflowTerminatedError": "azync_flow.errors",
    "EventContext": "azync_flow.events",
    "attach_subscribers": "azync_flow.events",
    "subscriber": "azync_flow.events",
    "Replayer": "azync_flow.replay",
    "RetryPolicy": "azync_flow.retry",
    "Reconciled": "azync_flow.runtime.uncertain",
    "current_activity": "azync_flow.runtime.activity_runner",
    "attach_workflows": "azync_flow.runtime.worker_runtime",
    "Config": "azync_flow.store",
    "open_store": "azync_flow.store.postgres",
    "ScheduleSpec": "azync_flow.schedules",
    "StartWorkflow": "azync_flow.schedules",
    "attach_schedules": "azync_flow.schedules",
    "Worker": "azync_flow.worker",
    "ActivityOptions": "azync_flow.workflow",
    "Registry": "azync_flow.workflow",
    "WorkflowContext": "azync_flow.workflow",
    "activity": "azync_flow.workflow",
}

__all__ = [
    "DAG",
    "ActivityError",
    "ActivityOptions",
    "AzyncError",
    "ChildWorkflowError",
    "Client",
    "Config",
    "DAGClient",
    "DAGValidationError",
    "EventContext",
    "NonDeterminismError",
    "NotReady",
    "QueryFailedError",
    "QueryNotFoundError",
    "QueryTimeoutError",
    "Reconciled",
    "Registry",
    "Replayer",
    "RetryPolicy",
    "ScheduleSpec",
    "SchemaNotMigratedError",
    "Skip",
    "StartWorkflow",
    "StoreUnavailableError",
    "TaskContext",
    "Uncertain",
    "UpdateFailedError",
    "UpdateRejectedError",
    "Worker",
    "WorkflowCancelledError",
    "WorkflowContext",
    "WorkflowFailedError",
    "WorkflowTerminatedError",
    "activity",
    "attach_dags",
    "attach_schedules",
    "attach_subscribers",
    "attach_workflows",
    "current_activity",
    "open_store",
    "subscriber",
    "workflow",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        try:  # a submodule not imported yet (``azync_flow.dag`` after ``import azync_flow``)
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


class _Root(types.ModuleType):
    """``azync_flow.workflow`` is the decorator, as it was when this package imported
    everything eagerly: importing the ``azync_flow.workflow`` subpackage binds the
    subpackage to this attribute, and that binding is ignored here."""

    @property
    def workflow(self) -> Any:
        return importlib.import_module("azync_flow.workflow").workflow

    @workflow.setter
    def workflow(self, _module: Any) -> None:
        pass


sys.modules[__name__].__class__ = _Root
