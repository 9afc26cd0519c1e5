"""Runtime glue between the store and the replay engine: workflow tasks and activities."""

from azync_flow.runtime.activity_runner import ActivityRunner, current_activity
from azync_flow.runtime.local import LocalRuntime
from azync_flow.runtime.workflow_runner import WorkflowRunner

__all__ = ["ActivityRunner", "LocalRuntime", "WorkflowRunner", "current_activity"]
