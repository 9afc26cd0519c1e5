"""Workflow-as-code API: ``@workflow``, ``@activity``, ``WorkflowContext``, ``Registry``."""

from azync_flow.retry import RetryPolicy
from azync_flow.workflow._children import ChildHandle, ParentClosePolicy
from azync_flow.workflow._context import WorkflowContext
from azync_flow.workflow._definitions import (
    ActivityDefinition,
    ActivityOptions,
    Registry,
    WorkflowDefinition,
    activity,
    workflow,
)
from azync_flow.workflow._limits import HistoryLimit

__all__ = [
    "ActivityDefinition",
    "ActivityOptions",
    "ChildHandle",
    "HistoryLimit",
    "ParentClosePolicy",
    "Registry",
    "RetryPolicy",
    "WorkflowContext",
    "WorkflowDefinition",
    "activity",
    "workflow",
]
