"""The recording subscriber shared by test_subscriber_redelivery and its
subprocess: each delivery inserts its event id into ``seen`` and returns."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta

from azync_flow.events import EventContext, SubscriberDefinition, subscriber
from azync_flow.store.postgres import PostgresStore

EVENT = "recorded"
SEEN_TABLE = "CREATE TABLE seen (event_id uuid NOT NULL)"


def recorder_for(store: PostgresStore, concurrency: int, lease: timedelta) -> SubscriberDefinition:
    @subscriber(EVENT, name="recorder", concurrency=concurrency, lease=lease)
    async def recorder(payload: dict[str, int], ctx: EventContext) -> None:
        await store.pool.execute("INSERT INTO seen (event_id) VALUES ($1)", ctx.event_id)

    return recorder


def slow_acks(store: PostgresStore, delay: float) -> None:
    """Delay every ack statement by ``delay`` seconds (a database slow to take acks)."""
    if delay <= 0:
        return
    ack_many = store.ack_many

    async def slow(items: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
        await asyncio.sleep(delay)
        return await ack_many(items)

    store.ack_many = slow  # type: ignore[method-assign]
