"""Workflow verbs of the PostgreSQL driver (contract
:mod:`azync_flow.store.workflows`): executions, history, the runtime's lease,
load and commit of passes, operations (uncertain ones included), children,
queries and updates.

The verbs live in one module per concern (core, runtime, hot path, children,
interaction, listing, reaper, reset, terminate, timeouts, uncertain); :class:`WorkflowMixin`
joins them for ``PostgresStore``.
"""

from __future__ import annotations

from .core import WORKFLOW_TASK
from .hotpath import WorkflowHotPathMixin
from .listing import WorkflowDoneSubscription, WorkflowListingMixin
from .reaper import WorkflowReaperMixin
from .reset import WorkflowResetMixin
from .terminate import WORKFLOW_TERMINATED_EVENT, WorkflowTerminateMixin
from .timeouts import WorkflowTimeoutsMixin
from .transactional import OperationTransactionMixin
from .uncertain import LEASE_EXPIRED_REASON, UncertainMixin

__all__ = [
    "LEASE_EXPIRED_REASON",
    "WORKFLOW_TASK",
    "WORKFLOW_TERMINATED_EVENT",
    "WorkflowDoneSubscription",
    "WorkflowMixin",
]


class WorkflowMixin(
    UncertainMixin,
    WorkflowReaperMixin,
    WorkflowListingMixin,
    WorkflowHotPathMixin,
    WorkflowTerminateMixin,
    WorkflowTimeoutsMixin,
    WorkflowResetMixin,
    OperationTransactionMixin,
):
    """Every workflow verb of :class:`~azync_flow.store.postgres.PostgresStore`."""
