"""azync_flow: durable execution for Python on PostgreSQL.

The public names below are imported on first use, so ``import azync_flow``
(and the pytest plugin in :mod:`azync_flow.testing`, loaded in every pytest
session of a project that installs azync_flow) costs next to nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # ``workflow`` and ``activity`` are modules that decorate when called;
    # type checkers see the decorator functions.
    from azync_flow._workflow.definitions import activity as activity
    from azync_flow._workflow.definitions import workflow as workflow
    from azync_flow.activity import Reconciled, current_activity, transaction
    from azync_flow.app import attach_dags, attach_schedules, attach_subscribers, attach_workflows
    from azync_flow.client import Client
    from azync_flow.dag import DAG, DAGClient, TaskContext
    from azync_flow.errors import (
        ActivityError,
        ActivityTimeoutError,
        AzyncError,
        ChildWorkflowError,
        ChildWorkflowTimeoutError,
        DAGValidationError,
        NonDeterminismError,
        NotReady,
        QueryFailedError,
        QueryNotFoundError,
        QueryTimeoutError,
        SchemaNotMigratedError,
        Skip,
        StoreDsnError,
        StoreLoginRefusedError,
        StoreUnavailableError,
        Uncertain,
        UpdateFailedError,
        UpdateRejectedError,
        WorkflowCancelledError,
        WorkflowFailedError,
        WorkflowTerminatedError,
        WorkflowTimeoutError,
    )
    from azync_flow.events import EventContext, subscriber
    from azync_flow.limits import ConcurrencyLimit, RateLimit
    from azync_flow.replay import Replayer
    from azync_flow.retry import RetryPolicy
    from azync_flow.schedules import ScheduleSpec, StartWorkflow
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store
    from azync_flow.worker import Worker
    from azync_flow.workflow import ActivityOptions, Registry, WorkflowContext

#: Public name -> the module that exports it (``workflow`` and ``activity`` are
#: the modules of those names: see :mod:`azync_flow.workflow`).
_HOMES = {
    "Client": "azync_flow.client",
    "ConcurrencyLimit": "azync_flow.limits",
    "RateLimit": "azync_flow.limits",
    "DAG": "azync_flow.dag",
    "DAGClient": "azync_flow.dag",
    "DAGValidationError": "azync_flow.errors",
    "NotReady": "azync_flow.errors",
    "Skip": "azync_flow.errors",
    "TaskContext": "azync_flow.dag",
    "attach_dags": "azync_flow.app",
    "ActivityError": "azync_flow.errors",
    "ActivityTimeoutError": "azync_flow.errors",
    "ChildWorkflowTimeoutError": "azync_flow.errors",
    "WorkflowTimeoutError": "azync_flow.errors",
    "AzyncError": "azync_flow.errors",
    "ChildWorkflowError": "azync_flow.errors",
    "NonDeterminismError": "azync_flow.errors",
    "QueryFailedError": "azync_flow.errors",
    "QueryNotFoundError": "azync_flow.errors",
    "QueryTimeoutError": "azync_flow.errors",
    "SchemaNotMigratedError": "azync_flow.errors",
    "StoreDsnError": "azync_flow.errors",
    "StoreLoginRefusedError": "azync_flow.errors",
    "StoreUnavailableError": "azync_flow.errors",
    "Uncertain": "azync_flow.errors",
    "UpdateFailedError": "azync_flow.errors",
    "UpdateRejectedError": "azync_flow.errors",
    "WorkflowCancelledError": "azync_flow.errors",
    "WorkflowFailedError": "azync_flow.errors",
    "WorkflowTerminatedError": "azync_flow.errors",
    "EventContext": "azync_flow.events",
    "attach_subscribers": "azync_flow.app",
    "subscriber": "azync_flow.events",
    "Replayer": "azync_flow.replay",
    "RetryPolicy": "azync_flow.retry",
    "Reconciled": "azync_flow.activity",
    "current_activity": "azync_flow.activity",
    "transaction": "azync_flow.activity",
    "attach_workflows": "azync_flow.app",
    "Config": "azync_flow.store",
    "open_store": "azync_flow.store.postgres",
    "ScheduleSpec": "azync_flow.schedules",
    "StartWorkflow": "azync_flow.schedules",
    "attach_schedules": "azync_flow.app",
    "Worker": "azync_flow.worker",
    "ActivityOptions": "azync_flow.workflow",
    "Registry": "azync_flow.workflow",
    "WorkflowContext": "azync_flow.workflow",
}

__all__ = [
    "DAG",
    "ActivityError",
    "ActivityOptions",
    "ActivityTimeoutError",
    "AzyncError",
    "ChildWorkflowError",
    "ChildWorkflowTimeoutError",
    "Client",
    "ConcurrencyLimit",
    "Config",
    "DAGClient",
    "DAGValidationError",
    "EventContext",
    "NonDeterminismError",
    "NotReady",
    "QueryFailedError",
    "QueryNotFoundError",
    "QueryTimeoutError",
    "RateLimit",
    "Reconciled",
    "Registry",
    "Replayer",
    "RetryPolicy",
    "ScheduleSpec",
    "SchemaNotMigratedError",
    "Skip",
    "StartWorkflow",
    "StoreDsnError",
    "StoreLoginRefusedError",
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
    "WorkflowTimeoutError",
    "activity",
    "attach_dags",
    "attach_schedules",
    "attach_subscribers",
    "attach_workflows",
    "current_activity",
    "open_store",
    "subscriber",
    "transaction",
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
