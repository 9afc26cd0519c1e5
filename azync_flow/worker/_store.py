"""The roles of the storage contract a worker uses.

The worker sees the store only through :class:`WorkerStore`, a union of
contract roles declared in :mod:`azync_flow.store` (never through the Postgres
driver), so any driver that implements these roles can be worked.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..store.admin import BacklogReader, Migrator, StatsMaintenance
from ..store.leadership import IdentityClaimer, LeaseElector
from ..store.queue import LimitStore, Notifier, QueueConsumer, QueueMaintenance


@runtime_checkable
class WorkerStore(
    QueueConsumer,
    QueueMaintenance,
    LimitStore,
    StatsMaintenance,
    BacklogReader,
    Notifier,
    LeaseElector,
    IdentityClaimer,
    Migrator,
    Protocol,
):
    """What a :class:`~azync_flow.worker.Worker` calls: lease and settle jobs,
    their maintenance and counters, the backlog for the metric gauges,
    wake-ups, leadership leases, its worker identity, the limits it declares, and the
    schema check at start."""
