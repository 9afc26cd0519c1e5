"""azync_flow: durable execution for Python on PostgreSQL."""

from azync_flow.errors import (
    ActivityError,
    AzyncError,
    NonDeterminismError,
    Uncertain,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from azync_flow.replay import Replayer
from azync_flow.retry import RetryPolicy
from azync_flow.runtime.uncertain import Reconciled
from azync_flow.workflow import (
    ActivityOptions,
    Registry,
    WorkflowContext,
    activity,
    workflow,
)

__all__ = [
    "ActivityError",
    "ActivityOptions",
    "AzyncError",
    "NonDeterminismError",
    "Reconciled",
    "Registry",
    "Replayer",
    "RetryPolicy",
    "Uncertain",
    "WorkflowCancelledError",
    "WorkflowContext",
    "WorkflowFailedError",
    "activity",
    "workflow",
]
