"""Runtime glue between the store and the replay engine: workflow tasks and activities.

The one way to run workflows is a :class:`~azync_flow.worker.Worker` with the
workflow runtime attached: ``attach_workflows(worker, workflows, activities)``.
"""

from azync_flow.runtime.activity_runner import ActivityRunner, current_activity
from azync_flow.runtime.local import LocalRuntime
from azync_flow.runtime.worker_runtime import (
    WORKFLOW_LEADERSHIP,
    WorkflowRuntime,
    attach_workflows,
    workflow_runtime,
)
from azync_flow.runtime.workflow_runner import WorkflowRunner

__all__ = [
    "WORKFLOW_LEADERSHIP",
    "ActivityRunner",
    "LocalRuntime",
    "WorkflowRunner",
    "WorkflowRuntime",
    "attach_workflows",
    "current_activity",
    "workflow_runtime",
]
