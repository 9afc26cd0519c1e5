"""Workflow-as-code API: ``@workflow``, ``@activity``, ``WorkflowContext``, ``Registry``."""

from azync_flow.retry import RetryPolicy
from azync_flow.workflow._context import WorkflowContext
from azync_flow.workflow._definitions import (
    ActivityDefinition,
    ActivityOptions,
    Registry,
    WorkflowDefinition,
    activity,
    workflow,
)

__all__ = [
    "ActivityDefinition",
    "ActivityOptions",
    "Registry",
    "RetryPolicy",
    "WorkflowContext",
    "WorkflowDefinition",
    "activity",
    "workflow",
]
