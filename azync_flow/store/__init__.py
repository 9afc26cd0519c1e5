"""The storage contract: one module per domain, each holding its ``typing.Protocol``
roles and its value types (msgspec Structs); the Postgres driver in
:mod:`azync_flow.store.postgres` implements them all.

========================  =====================================================
:mod:`.queue`             jobs of every source, enqueue, lease, settle, wake-ups
:mod:`.events`            the event ledger: publish, subscribers, retention
:mod:`.dags`              DAG runs, their tasks and the scheduler tick
:mod:`.workflows`         executions, history, replay passes, operations
:mod:`.schedules`         schedules and their run ledger
:mod:`.leadership`        leadership leases and the worker registry
:mod:`.admin`             migrations, job admin across sources, counters
========================  =====================================================

The runtime (worker, workflow, DAG scheduler, client) codes against these
Protocols, each part typing its store with the narrowest role it needs, never
against the Postgres driver. Each method ports one method of the driver
contract (``driver-contract.go.txt``) clause by clause; the Go doc comment is
the specification and is summarised on the Protocol. Python conventions of the
port:

* every I/O method is ``async``; ``context.Context`` is dropped (cancel the
  awaiting task instead);
* ``(value, err)`` returns become a value plus raised errors: a not-found
  error is :class:`~azync_flow.errors.NotFoundError` (see ``is_not_found``),
  any other backend failure a :class:`~azync_flow.errors.StoreError`;
* multi-value returns become tuples (``reap_expired -> (reaped, killed)``);
* ``uuid.Nil`` / zero times are ``None``; durations are ``timedelta``; times
  are UTC-aware ``datetime``; payloads are ``bytes`` of JSON exactly as the
  caller gave it;
* a Go channel (``Wake``, ``Changes``) is a
  :class:`~azync_flow.store.Subscription`, an async iterator closed
  with its ``close()`` (the Go ``ctx`` ending); ``None`` instead of a
  subscription means the backend is poll-only;
* leadership is returned as ``None`` when another instance leads.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, runtime_checkable

import msgspec

from ._common import Subscription, TTx_contra
from .admin import (
    BacklogReader,
    ChangeNotifier,
    Closable,
    ConsoleReads,
    JobAdmin,
    Migrator,
    StatsMaintenance,
)
from .dags import DAGAdmin, DAGConsumer, DAGMaintenance, DAGProducer, TxDAGProducer
from .events import EventAdmin, EventConsumer, EventMaintenance, EventProducer, TxEventProducer
from .leadership import IdentityClaimer, LeaseElector, WorkerRegistryStore
from .queue import (
    LimitStore,
    Notifier,
    QueueConsumer,
    QueueMaintenance,
    QueueProducer,
    TxQueueProducer,
)
from .schedules import ScheduleStore
from .workflows import (
    OperationStore,
    TxWorkflowProducer,
    UncertainStore,
    WorkflowAdmin,
    WorkflowInteractionStore,
    WorkflowMaintenance,
    WorkflowProducer,
)

__all__ = ["Config", "Store", "Subscription", "default_channel"]


def default_channel(schema: str) -> str:
    """The NOTIFY channel of a schema when ``Config.notify_channel`` is empty.

    ``azync_wake_<schema>``, so stores on different schemas of one database
    never wake each other; a schema name too long for a 63-byte identifier is
    replaced by a stable hash of it.
    """
    channel = f"azync_wake_{schema}"
    if len(channel) <= 63:
        return channel
    return f"azync_wake_{hashlib.sha256(schema.encode()).hexdigest()[:32]}"


class Config(msgspec.Struct, kw_only=True):
    """Driver configuration.

    Attributes:
        schema: Postgres schema to isolate the tables in; empty means ``public``.
            Validated as an identifier and quoted.
        notify_channel: LISTEN/NOTIFY channel; empty means ``azync_wake_<schema>``
            (one channel per schema, so other schemas' traffic never wakes
            this store's workers).
        migrations_table: version-tracking table; empty means ``azync_migrations``.
        poll_only: disable push wake-ups, forcing the polling path.
        min_pool_size / max_pool_size: asyncpg pool bounds.
    """

    schema: str = ""
    notify_channel: str = ""
    migrations_table: str = ""
    poll_only: bool = False
    min_pool_size: int = 2
    max_pool_size: int = 10


@runtime_checkable
class Store(
    QueueProducer,
    TxQueueProducer[TTx_contra],
    QueueConsumer,
    QueueMaintenance,
    LimitStore,
    Notifier,
    EventProducer,
    TxEventProducer[TTx_contra],
    EventConsumer,
    EventMaintenance,
    EventAdmin,
    DAGProducer,
    TxDAGProducer[TTx_contra],
    DAGConsumer,
    DAGMaintenance,
    DAGAdmin,
    WorkflowProducer,
    TxWorkflowProducer[TTx_contra],
    WorkflowAdmin,
    WorkflowMaintenance,
    UncertainStore,
    OperationStore,
    WorkflowInteractionStore,
    ScheduleStore,
    LeaseElector,
    IdentityClaimer,
    WorkerRegistryStore,
    Migrator,
    Closable,
    StatsMaintenance,
    BacklogReader,
    JobAdmin,
    ChangeNotifier,
    ConsoleReads,
    Protocol[TTx_contra],
):
    """Every role of the contract: what a complete driver implements
    (``TTx_contra``: its connection type, for the verbs that write in the
    caller's transaction)."""
