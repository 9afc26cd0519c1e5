"""``@subscriber``: an async function that receives the events of one type."""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ..retry import RetryPolicy
from ..store.events import TransactionIsolation
from ..store.validate import check_max_attempts, check_name

__all__ = ["Ordering", "SubscriberDefinition", "subscriber"]

Handler = Callable[..., Awaitable[Any]]

#: ``"none"``: deliveries run as they come, up to ``concurrency`` at once;
#: ``"key"``: one delivery per event key at a time, in publish order.
Ordering = Literal["none", "key"]


@dataclass(frozen=True, slots=True)
class SubscriberDefinition:
    """One subscription: ``name`` receives every event of ``event_type``.

    Attributes:
        event_type: the event type subscribed to.
        name: the subscriber's durable name (one delivery per event and name).
        fn: the handler, ``async def (payload)`` or ``(payload, ctx: EventContext)``.
        retry: backoff and attempt budget of failed deliveries (None: the worker's).
        max_attempts: attempt budget (default: ``retry.maximum_attempts``, else the worker's).
        concurrency: deliveries of this subscriber running at once per worker.
        lease: lease per delivery attempt (None: the worker's).
        payload_type: what the payload decodes as (None: the annotation of
            the handler's first parameter).
        ordering: ``"key"``: the events of one key are delivered one at a
            time in publish order (see docs/events.md); ``"none"``: no order.
        transactional: the handler runs inside the transaction that acks
            its delivery (``ctx.connection``); see :func:`subscriber`.
        isolation: that transaction's isolation level.
    """

    event_type: str
    name: str
    fn: Handler
    retry: RetryPolicy | None = None
    max_attempts: int | None = None
    concurrency: int | None = None
    lease: timedelta | None = None
    payload_type: Any = None
    ordering: Ordering = "none"
    transactional: bool = False
    isolation: TransactionIsolation = "read_committed"

    async def __call__(self, *args: Any) -> Any:
        """Call the handler directly (unit tests of its logic)."""
        return await self.fn(*args)


def subscriber(
    event_type: str,
    *,
    name: str,
    retry: RetryPolicy | None = None,
    max_attempts: int | None = None,
    concurrency: int | None = None,
    lease: timedelta | None = None,
    payload_type: Any = None,
    ordering: Ordering = "none",
    transactional: bool = False,
    isolation: TransactionIsolation = "read_committed",
) -> Callable[[Handler], SubscriberDefinition]:
    """Declare an event subscriber (run by a worker after ``attach_subscribers``).

    Example::

        @subscriber("order.placed", name="shipper", retry=RetryPolicy(maximum_attempts=5))
        async def ship(order: Order, ctx: EventContext) -> None:
            ...

    Each event of ``event_type`` published once ``name`` is registered gets
    one delivery for it: a leased job retried per ``retry`` and dead-lettered
    when its budget is spent (see :class:`SubscriberDefinition`).

    With ``ordering="key"`` the deliveries of one key (``publish(..., key=...)``)
    run one at a time, in publish order, across every worker: the next event of
    a key waits while one of that key is running or waiting for its retry;
    different keys still run in parallel. A dead-lettered delivery no longer
    holds its key back. Without it, deliveries run in no guaranteed order.

    With ``transactional=True`` the handler takes ``(payload, ctx)`` and runs
    inside the transaction that acks its delivery: its statements on
    ``ctx.connection`` (asyncpg, the database's default ``search_path``) and
    the ack commit together or not at all, so a projection written there is
    written exactly once per event however often the delivery is retried or
    its worker killed. A serialization failure or deadlock (SQLSTATE 40001 /
    40P01) runs the handler again at once; any other exception rolls it back
    and follows ``retry``. ``isolation``: ``"read_committed"`` (default),
    ``"repeatable_read"`` or ``"serializable"``.

    Raises:
        ValueError: an empty or overlong ``event_type``/``name``, ``max_attempts``
            < 1, ``ordering`` other than ``"none"`` or ``"key"``, or an unknown
            ``isolation``.
    """
    for value, field in ((event_type, "event_type"), (name, "subscriber name")):
        check_name(value, field)
    if max_attempts is not None:
        check_max_attempts(max_attempts)
    if ordering not in ("none", "key"):
        raise ValueError(f'ordering must be "none" or "key", not {ordering!r}')
    if isolation not in typing.get_args(TransactionIsolation):
        raise ValueError(f"isolation must be one of {typing.get_args(TransactionIsolation)}")

    def wrap(fn: Handler) -> SubscriberDefinition:
        return SubscriberDefinition(
            event_type=event_type,
            name=name,
            fn=fn,
            retry=retry,
            max_attempts=max_attempts,
            concurrency=concurrency,
            lease=lease,
            payload_type=payload_type,
            ordering=ordering,
            transactional=transactional,
            isolation=isolation,
        )

    return wrap
