"""Event ledger verbs of the PostgreSQL driver (contract
:mod:`azync_flow.store.events`): publish with atomic fan-out, subscribers,
admin reads, replay and retention.

A published event is one ``azync_events`` row plus one pending delivery job
(source ``event``, kind = subscriber name) per subscriber registered for its
type at publish time, written in one statement. Deliveries are leased with
``dequeue_batch(Source.EVENT, ...)``, which returns them with ``Job.event``
rehydrated from the ledger.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg

from ...errors import ConflictError, NotFoundError
from .._common import TransactionIsolation
from ..events import (
    EventAdminRow,
    EventFilter,
    OpsStats,
    PublishParams,
    ReplayFilter,
    Subscriber,
    SubscriberView,
)
from ..validate import check_name
from ._base import PgBase, decode_meta, encode_meta, stale_lease
from ._guard import translate
from ._queries import QUERIES
from ._steptx import PgStepTransaction, open_step_transaction

__all__ = [
    "EventMixin",
]


class _PgDeliveryTransaction(PgStepTransaction):
    """``DeliveryTransaction`` of the PostgreSQL driver."""

    def __init__(
        self,
        store: PgBase,
        conn: asyncpg.Connection,
        tx: Any,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
    ) -> None:
        super().__init__(store, conn, tx)
        self._job = job_id
        self._token = lease_token

    async def ack(self) -> None:
        await self._settling()
        if await self._store._fetchrow("job_ack", self._job, self._token, conn=self._conn) is None:
            raise NotFoundError(stale_lease(self._job, "delivery"))
        await self._commit()


class EventMixin(PgBase):
    @asynccontextmanager
    async def delivery_transaction(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AsyncIterator[_PgDeliveryTransaction]:
        """Implements ``TransactionalEventConsumer.delivery_transaction`` (documented there)."""

        def make(conn: asyncpg.Connection, tx: Any) -> _PgDeliveryTransaction:
            return _PgDeliveryTransaction(self, conn, tx, job_id, lease_token)

        async with open_step_transaction(
            self,
            "event_delivery_transaction_open",
            job_id,
            (job_id, lease_token),
            isolation,
            make,
            "delivery",
        ) as handle:
            yield handle

    async def publish(self, p: PublishParams) -> int:
        """Implements ``EventProducer.publish`` (documented there)."""
        async with self.connection() as conn:
            return await self.publish_tx(conn, p)

    async def publish_tx(self, tx: asyncpg.Connection, p: PublishParams) -> int:
        """Contract ``TxStore.PublishTx``: :meth:`publish` on the caller's
        connection ``tx``, committing or rolling back with its transaction.

        The statement names the store's schema, so ``tx`` may come from the
        caller's own pool with any search path."""
        if p.payload is None:
            raise ValueError("PublishParams.payload is required (JSON bytes, e.g. b'null')")
        try:
            row = await tx.fetchrow(
                QUERIES["event_publish"].replace(
                    "SELECT azync_publish_event(", f'SELECT "{self.schema}".azync_publish_event('
                ),
                self.now(),
                p.id,
                p.type,
                p.aggregate_type,
                p.aggregate_id,
                p.version,
                p.occurred_at,
                p.payload,
                encode_meta(p.meta),
                self.channel,
            )
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(f"event {p.id} already exists") from exc
        except Exception as exc:  # the caller's connection is not guarded by our pool
            err = translate(exc, self.schema)
            if err is None:
                raise
            raise err from exc
        assert row is not None
        return int(row["delivered"])

    # --- subscribers -------------------------------------------------------------

    async def register_subscriber(self, sub: Subscriber) -> None:
        """Upsert ``(sub.name, sub.event_type)``; an existing registration's
        ``max_attempts`` and ``ordered`` are updated (0 = the runtime default on
        first lease; ``ordered`` applies to deliveries created from then on)."""
        await self._fetch(
            "event_register_subscriber", sub.name, sub.event_type, sub.max_attempts, sub.ordered
        )

    async def subscribers(self, event_type: str) -> list[Subscriber]:
        """Implements ``EventConsumer.subscribers`` (documented there)."""
        check_name(event_type, "event_type")
        rows = await self._fetch("event_subscribers", event_type)
        return [
            Subscriber(
                name=r["name"],
                event_type=r["event_type"],
                max_attempts=r["max_attempts"],
                ordered=r["ordered"],
            )
            for r in rows
        ]

    async def delete_subscriber(self, name: str, event_type: str) -> int:
        """Implements ``EventConsumer.delete_subscriber`` (documented there)."""
        return int(await self._fetchval("event_delete_subscriber", name, event_type))

    async def list_subscriber_views(self, event_type: str) -> list[SubscriberView]:
        """Registrations ordered by event type then name; ``''`` returns all."""
        rows = await self._fetch("event_subscribers", event_type)
        return [
            SubscriberView(
                event_type=r["event_type"],
                subscriber=r["name"],
                max_attempts=r["max_attempts"],
                ordered=r["ordered"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
            for r in rows
        ]

    # --- admin reads ----------------------------------------------------------------

    async def list_events(
        self, filter: EventFilter, offset: int, limit: int
    ) -> tuple[list[EventAdminRow], int]:
        """Ledger events matching ``filter``, newest first (occurred_at desc, then
        id), paginated, and the total matching count.

        ``since``/``until`` bound ``occurred_at`` as ``[since, until)``;
        ``undispatched`` True keeps events without deliveries, False those with.
        """
        rows = await self._fetch(
            "event_list",
            filter.type,
            filter.undispatched,
            filter.since,
            filter.until,
            max(offset, 0),
            max(limit, 0),
        )
        total = int(rows[0]["total"]) if rows else 0
        return [_event_row(r) for r in rows if r["id"] is not None], total

    async def get_event(self, id: uuid.UUID) -> EventAdminRow:
        """``EventAdmin.get_event``: one ledger event."""
        row = await self._fetchrow("event_get", id)
        if row is None:
            raise NotFoundError(f"no event {id}")
        return _event_row(row)

    async def ops_stats(self) -> OpsStats:
        """Events without deliveries, events and distinct types whose occurred_at
        is in the last 24 hours (backend clock), and the registration count."""
        r = await self._fetchrow("event_ops_stats")
        assert r is not None
        return OpsStats(
            undispatched=r["undispatched"],
            total_24h=r["total_24h"],
            types_24h=r["types_24h"],
            subscribers=r["subscribers"],
        )

    # --- replay and retention -------------------------------------------------------

    async def replay(self, filter: ReplayFilter) -> int:
        """Re-fan-out matching events into fresh pending deliveries flagged
        ``replay``, for the subscribers registered now (only
        ``filter.subscriber`` when set), oldest event first.

        ``since``/``until`` bound ``occurred_at`` as ``[since, until)``;
        ``limit`` caps the number of events replayed (<= 0: no cap).

        Returns:
            The number of deliveries created.
        """
        row = await self._fetchrow(
            "event_replay",
            filter.subscriber,
            filter.event_type,
            filter.event_id,
            filter.since,
            filter.until,
            filter.limit,
            self.channel,
        )
        assert row is not None
        return int(row["created"])

    async def retain(self, before: datetime, limit: int) -> int:
        """Implements ``EventMaintenance.retain`` (documented there)."""
        if limit <= 0:
            return 0
        return int(await self._fetchval("event_retain", before, limit))


def _event_row(r: asyncpg.Record) -> EventAdminRow:
    deliveries = int(r["deliveries"])
    return EventAdminRow(
        id=r["id"],
        type=r["type"],
        aggregate_type=r["aggregate_type"],
        aggregate_id=r["aggregate_id"],
        version=r["version"],
        occurred_at=r["occurred_at"],
        dispatched_at=r["occurred_at"] if deliveries else None,
        meta=decode_meta(r["meta"]),
        payload=bytes(r["payload"]),
        deliveries=deliveries,
    )
