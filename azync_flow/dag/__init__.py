"""Static DAGs with sagas: decorator-built task graphs, compensation, failure policies."""

from ..retry import RetryPolicy
from ._client import DAGClient, DAGRun, SignalReceipt
from ._context import TaskContext, TaskOutcome
from ._definition import DAG, RESERVED_PREFIXES, TaskSpec
from ._events import DAGEvent
from ._runner import DAGRunner
from ._scheduler import DAGScheduler, TickStats
from ._testing import run_until_settled
from ._worker import DAG_LEADERSHIP, DAGWorkerBinding

__all__ = [
    "DAG",
    "DAG_LEADERSHIP",
    "RESERVED_PREFIXES",
    "DAGClient",
    "DAGEvent",
    "DAGRun",
    "DAGRunner",
    "DAGScheduler",
    "DAGWorkerBinding",
    "RetryPolicy",
    "SignalReceipt",
    "TaskContext",
    "TaskOutcome",
    "TaskSpec",
    "TickStats",
    "run_until_settled",
]
