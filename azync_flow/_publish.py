"""Publishing to the event ledger: the one path from a user's value to
``EventProducer.publish`` / ``TxEventProducer.publish_tx``.

Every entry point (``Client.publish``, ``current_activity().publish``,
``EventContext.publish``, the scheduler's missed and skipped events) goes
through :func:`publish_event`, so payloads meet the one encoder and names the
one identifier check.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

import asyncpg

from azync_flow._transaction import check_transaction
from azync_flow.codec import encode_value
from azync_flow.errors import ConflictError
from azync_flow.store.events import EventProducer, PublishParams, TxEventProducer
from azync_flow.store.validate import check_id, check_meta, check_name, check_text
from azync_flow.telemetry import traced_meta

__all__ = ["EventStore", "derived_event_id", "publish_event", "publish_once"]

#: Namespace of event ids derived from the work that publishes them.
_EVENT_NS = uuid.UUID("6f1f5a52-3c1e-4f0e-9a57-2f6c1d1e9b10")


class EventStore(EventProducer, TxEventProducer[asyncpg.Connection], Protocol):
    """The roles publishing uses: publish, also in the caller's transaction."""


async def publish_event(
    store: EventStore,
    event_type: str,
    payload: Any = None,
    *,
    key: str | None = None,
    id: uuid.UUID | str | None = None,
    meta: Mapping[str, str] | None = None,
    conn: asyncpg.Connection | None = None,
) -> uuid.UUID:
    """Append one event to the ledger; one delivery per subscriber of
    ``event_type`` registered now is created with it, atomically.

    Args:
        store: the store.
        event_type: the event's type, e.g. ``"order.placed"`` (at most 255 characters).
        payload: a msgspec-encodable value (Struct, dataclass, dict, ...).
        key: what the event is about (an order id, ...); subscribers see it as
            ``ctx.key``. Stored as the event's aggregate id.
        id: the event id (default: a fresh uuid4). Reusing one raises.
        meta: string annotations; the caller's trace context is added.
        conn: an asyncpg connection of the caller; the event is written on it,
            so inside the caller's transaction it exists if and only if that
            transaction commits (the outbox pattern). Its search path does not
            matter: the statement names the store's schema.

    Returns:
        The event id.

    Raises:
        ValueError: ``event_type`` is empty, ``event_type`` or ``key`` contains
            NUL, or the name is too long; an ``id`` str that is not a UUID;
            ``conn`` has no open transaction.
        TypeError: ``event_type`` or ``key`` is not a str; ``id`` is neither a
            UUID nor a str; ``conn`` is not an asyncpg connection (a pool, ...).
        PayloadEncodeError: ``payload`` is not JSON-encodable.
        ConflictError: an event with this ``id`` exists (on ``conn`` this also
            aborts the caller's transaction, as any failed statement does).
    """
    check_name(event_type, "event_type")
    if key is not None:
        check_text(key, "key")
    check_meta(meta)
    event_id = uuid.uuid4() if id is None else check_id(id, "id")
    params = PublishParams(
        id=event_id,
        type=event_type,
        payload=encode_value(payload, f"payload of event {event_type!r}"),
        aggregate_id=key or "",
        meta=traced_meta(dict(meta) if meta else None),
    )
    if conn is None:
        await store.publish(params)
    else:
        check_transaction(conn, "publish")
        await store.publish_tx(conn, params)
    return event_id


def derived_event_id(scope: uuid.UUID, n: int) -> uuid.UUID:
    """The id of the ``n``-th event published by the work ``scope`` (a job id):
    the same on every attempt, so a retried attempt republishes nothing."""
    return uuid.uuid5(_EVENT_NS, f"{scope}:{n}")


async def publish_once(
    store: EventStore,
    scope: uuid.UUID,
    n: int,
    event_type: str,
    payload: Any,
    *,
    key: str | None,
    meta: Mapping[str, str] | None,
) -> uuid.UUID:
    """:func:`publish_event` with the id :func:`derived_event_id` gives; an
    event already published under that id (by an earlier attempt) counts as
    published. Returns the event id."""
    event_id = derived_event_id(scope, n)
    with contextlib.suppress(ConflictError):
        await publish_event(store, event_type, payload, key=key, id=event_id, meta=meta)
    return event_id
