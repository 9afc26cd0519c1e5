"""The roles of the storage contract schedules use."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from azync_flow._publish import EventStore
from azync_flow.store.admin import JobAdmin
from azync_flow.store.dags import DAGAdmin
from azync_flow.store.queue import QueueProducer
from azync_flow.store.schedules import ScheduleStore
from azync_flow.store.workflows import WorkflowAdmin

__all__ = ["ScheduleRuntimeStore"]


@runtime_checkable
class ScheduleRuntimeStore(
    ScheduleStore, EventStore, QueueProducer, WorkflowAdmin, DAGAdmin, JobAdmin, Protocol
):
    """What schedules need: their ledger, publishing missed and skipped times,
    enqueueing the jobs they fire, and reading (or cancelling) the runs they
    started to apply the overlap policy."""
