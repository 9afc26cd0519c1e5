"""Workflow store of the PostgreSQL driver: contract ``WorkflowStore`` plus the
runtime verbs (lease, load, commit a pass; complete an operation) and the
uncertain-operation verbs.

The verbs live in four modules (core, runtime, reaper, uncertain);
:class:`WorkflowMixin` joins them for ``PostgresStore``.
"""

from __future__ import annotations

from ..types import (
    BufferedSignal,
    Outcome,
    ReapReport,
    ResolvedOperation,
    UncertainOperation,
    WorkflowTaskState,
)
from .workflow_core import WORKFLOW_TASK
from .workflow_hotpath import WorkflowHotPathMixin
from .workflow_listing import WorkflowDoneSubscription, WorkflowListingMixin
from .workflow_reaper import WorkflowReaperMixin
from .workflow_terminate import WORKFLOW_TERMINATED_EVENT, WorkflowTerminateMixin
from .workflow_uncertain import LEASE_EXPIRED_REASON, UncertainMixin

__all__ = [
    "LEASE_EXPIRED_REASON",
    "WORKFLOW_TASK",
    "WORKFLOW_TERMINATED_EVENT",
    "BufferedSignal",
    "Outcome",
    "ReapReport",
    "ResolvedOperation",
    "UncertainOperation",
    "WorkflowDoneSubscription",
    "WorkflowMixin",
    "WorkflowTaskState",
]


class WorkflowMixin(
    UncertainMixin,
    WorkflowReaperMixin,
    WorkflowListingMixin,
    WorkflowHotPathMixin,
    WorkflowTerminateMixin,
):
    """Every workflow verb of :class:`~azync_flow.store.postgres.PostgresStore`."""
