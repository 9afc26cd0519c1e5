"""azync_flow: durable execution for Python on PostgreSQL."""

from azync_flow.dag import (
    DAG,
    DAGClient,
    DAGValidationError,
    NotReady,
    Skip,
    TaskContext,
    attach_dags,
)
from azync_flow.errors import (
    ActivityError,
    AzyncError,
    NonDeterminismError,
    SchemaNotMigratedError,
    StoreUnavailableError,
    Uncertain,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowTerminatedError,
)
from azync_flow.events import EventContext, attach_subscribers, subscriber
from azync_flow.replay import Replayer
from azync_flow.retry import RetryPolicy
from azync_flow.runtime.uncertain import Reconciled
from azync_flow.worker import Worker
from azync_flow.workflow import (
    ActivityOptions,
    Registry,
    WorkflowContext,
    activity,
    workflow,
)

__all__ = [
    "DAG",
    "ActivityError",
    "ActivityOptions",
    "AzyncError",
    "DAGClient",
    "DAGValidationError",
    "EventContext",
    "NonDeterminismError",
    "NotReady",
    "Reconciled",
    "Registry",
    "Replayer",
    "RetryPolicy",
    "SchemaNotMigratedError",
    "Skip",
    "StoreUnavailableError",
    "TaskContext",
    "Uncertain",
    "Worker",
    "WorkflowCancelledError",
    "WorkflowContext",
    "WorkflowFailedError",
    "WorkflowTerminatedError",
    "activity",
    "attach_dags",
    "attach_subscribers",
    "subscriber",
    "workflow",
]
