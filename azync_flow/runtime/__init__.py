"""The workflow runtime: workflow tasks (replay passes) and activity attempts
on a :class:`~azync_flow.worker.Worker`, with their maintenance.

``attach_workflows(worker, workflows, activities)`` (:mod:`azync_flow.app`)
builds it; nothing here is wired by hand.
"""

from azync_flow.runtime.activity_runner import ActivityRunner
from azync_flow.runtime.worker_runtime import (
    WORKFLOW_LEADERSHIP,
    WORKFLOW_TASK_KIND,
    WorkflowRuntime,
)
from azync_flow.runtime.workflow_runner import WorkflowRunner

__all__ = [
    "WORKFLOW_LEADERSHIP",
    "WORKFLOW_TASK_KIND",
    "ActivityRunner",
    "WorkflowRunner",
    "WorkflowRuntime",
]
