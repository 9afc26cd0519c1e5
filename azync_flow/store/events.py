"""The event ledger's contract: publishing with atomic fan-out to the
registered subscribers, the registrations themselves, retention, and the
operator's views (list, replay).
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from ._common import TransactionIsolation, TTx_contra

__all__ = [
    "DeliveryTransaction",
    "EventAdmin",
    "EventAdminRow",
    "EventConsumer",
    "EventFilter",
    "EventMaintenance",
    "EventProducer",
    "OpsStats",
    "PublishParams",
    "ReplayFilter",
    "Subscriber",
    "SubscriberView",
    "TransactionIsolation",
    "TransactionalEventConsumer",
    "TxEventProducer",
]


class PublishParams(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    type: str
    payload: bytes
    aggregate_type: str = ""
    aggregate_id: str = ""
    version: int = 0
    occurred_at: datetime | None = None
    meta: dict[str, str] = msgspec.field(default_factory=dict)


class Subscriber(msgspec.Struct, kw_only=True):
    name: str
    event_type: str
    max_attempts: int = 0
    #: deliveries run one key at a time, in publish order (``ordering="key"``)
    ordered: bool = False


class SubscriberView(msgspec.Struct, kw_only=True):
    event_type: str
    subscriber: str
    max_attempts: int
    ordered: bool
    created_at: datetime
    updated_at: datetime


class EventFilter(msgspec.Struct, kw_only=True):
    type: str = ""
    undispatched: bool | None = None
    since: datetime | None = None
    until: datetime | None = None


class EventAdminRow(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    type: str
    aggregate_type: str
    aggregate_id: str
    version: int
    occurred_at: datetime
    dispatched_at: datetime | None
    meta: dict[str, str]
    payload: bytes
    deliveries: int


class OpsStats(msgspec.Struct, kw_only=True):
    undispatched: int = 0
    total_24h: int = 0
    types_24h: int = 0
    subscribers: int = 0


class ReplayFilter(msgspec.Struct, kw_only=True):
    subscriber: str = ""
    event_type: str = ""
    event_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 0


@runtime_checkable
class EventProducer(Protocol):
    """Appends events to the ledger."""

    async def publish(self, p: PublishParams) -> int:
        """Append one event and fan out one pending delivery per registered
        subscriber of ``p.type``, atomically; wake each subscriber's workers.

        Returns:
            The number of deliveries created (0 when nobody subscribes).

        Raises:
            ConflictError: an event with the same ``id`` already exists.
        """
        ...


@runtime_checkable
class TxEventProducer(Protocol[TTx_contra]):
    """Appends events inside the caller's transaction ``tx`` (contract ``TxStore``)."""

    async def publish_tx(self, tx: TTx_contra, p: PublishParams) -> int:
        """:meth:`EventProducer.publish` on the caller's transaction."""
        ...


@runtime_checkable
class EventConsumer(Protocol):
    """Registers the subscribers whose deliveries a worker runs."""

    async def register_subscriber(self, sub: Subscriber) -> None:
        """Upsert a subscriber registration keyed by ``(name, event_type)``."""
        ...

    async def subscribers(self, event_type: str) -> list[Subscriber]:
        """Contract ``Subscribers``: the registrations for one event type.

        These are the subscribers a publish of ``event_type`` made now fans
        out to (one delivery each).

        Args:
            event_type: the event type, e.g. ``"order.placed"`` (exact match).

        Returns:
            Its registrations ordered by subscriber name (the database's
            collation); empty when nobody subscribes.

        Raises:
            ValueError: ``event_type`` is empty, longer than 255 characters or
                contains NUL (no type has such a name).
            TypeError: ``event_type`` is not a str.
        """
        ...

    async def delete_subscriber(self, name: str, event_type: str) -> int:
        """Remove ``(name, event_type)``, or every registration of ``name`` when
        ``event_type`` is empty. Deliveries already fanned out are untouched.

        Returns:
            The number of registrations removed.
        """
        ...


class DeliveryTransaction(Protocol):
    """The open transaction of one delivery of a transactional subscriber: the
    handler's statements run on :attr:`connection`; :meth:`ack` settles the
    delivery on the same connection and COMMITs, so the handler's writes and
    the delivery's ack commit together or not at all. Leaving the
    ``delivery_transaction`` block without it rolls everything back."""

    @property
    def connection(self) -> Any:
        """The driver connection (asyncpg) inside the transaction, with the
        database's default ``search_path`` (the application's)."""
        ...

    async def ack(self) -> None:
        """Ack the delivery (as ``JobSettler.ack``), then COMMIT.

        Raises:
            NotFoundError: the delivery is no longer active under the token
                (its lease was taken meanwhile); the transaction rolls back.
        """
        ...


@runtime_checkable
class TransactionalEventConsumer(Protocol):
    """Transactional subscribers: a delivery whose handler's SQL commits with
    its ack (exactly-once effects on the application's tables)."""

    def delivery_transaction(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AbstractAsyncContextManager[DeliveryTransaction]:
        """Open a transaction for leased delivery ``job_id``: it checks the
        delivery is active under ``lease_token`` (without locking it) and sets
        the database's default ``search_path`` for the handler's statements;
        :meth:`DeliveryTransaction.ack` restores the store's and fences again.

        Raises:
            NotFoundError: the delivery is not active under ``lease_token``.
        """
        ...


@runtime_checkable
class EventMaintenance(Protocol):
    """Retention of the ledger."""

    async def retain(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events that occurred before ``before`` and whose
        deliveries are all terminal (succeeded, dead, skipped or cancelled),
        cascading to those deliveries. An event with a pending, scheduled,
        active or paused delivery is kept. ``limit <= 0`` removes nothing.

        Returns:
            The number of events removed.
        """
        ...


@runtime_checkable
class EventAdmin(Protocol):
    """What an operator reads and does on the ledger."""

    async def list_events(
        self, filter: EventFilter, offset: int, limit: int
    ) -> tuple[list[EventAdminRow], int]:
        """Ledger events matching the filter, newest first, and the total count."""
        ...

    async def get_event(self, id: uuid.UUID) -> EventAdminRow:
        """One ledger event.

        Raises:
            NotFoundError: no event has this id.
        """
        ...

    async def list_subscriber_views(self, event_type: str) -> list[SubscriberView]:
        """Registrations ordered by event type then name ('' = all)."""
        ...

    async def ops_stats(self) -> OpsStats:
        """The event ledger admin summary."""
        ...

    async def replay(self, filter: ReplayFilter) -> int:
        """Re-fan-out matching events into fresh pending deliveries flagged replay."""
        ...
